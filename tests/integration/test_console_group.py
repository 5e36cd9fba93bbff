"""The web console in a real browser: headless Chromium (Debian's /usr/bin/chromium, which `./dev test` installs)
driven by Playwright, on a real `herd serve` with a live group of real consumers (kafka-python, confluent-kafka,
aiokafka). A new consumer joins while the group's page is open and one member is deliberately late to the join
phase (it holds its revocation callback): the page, refreshing by itself, shows the new generation, its cause and
the late member. A screenshot of the group page is saved in the test's directory and, when the environment
names one, at $HERD_CONSOLE_SCREENSHOT (docs/)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import consolebrowser
import pytest
from brokers import BrokerProcess
from groupmembers import (
    BROKER_OVERRIDES,
    AiokafkaMember,
    ConfluentMember,
    create_topic,
    produce,
    settled,
    start_members,
    wait_for,
)

pytestmark = pytest.mark.browser  # every test of this module drives Chromium (tests/lanes.py)

TOPIC, GROUP, PARTITIONS = "console-orders", "console-shop", 4
LATE_S = 1.5  # how long the late member holds its revocation callback before it rejoins


class LateMember(AiokafkaMember):
    """An aiokafka consumer that, once `late` is set, waits LATE_S in its revocation callback: it rejoins the
    group that long after the others."""

    late = False

    async def _revoking(self) -> None:
        if self.late:
            await asyncio.sleep(LATE_S)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    broker = BrokerProcess(
        tmp_path_factory.mktemp("console") / "data",
        {
            **BROKER_OVERRIDES,
            "herd.http.listener": "127.0.0.1:0",
            # KIP-848 members heartbeat every half second, as the classic members of groupmembers do
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.heartbeat.interval.ms": "500",
        },
    ).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def browser():
    with consolebrowser.browser() as chromium:
        yield chromium


def api(node: BrokerProcess, path: str) -> Any:
    with urllib.request.urlopen(f"http://{node.http}{path}", timeout=10) as response:
        return json.loads(response.read())


def test_the_group_page_shows_a_rebalance_its_cause_and_the_late_member(node, browser, members, tmp_path):
    create_topic(node.bootstrap, TOPIC, PARTITIONS)
    produce(node.bootstrap, TOPIC, PARTITIONS, 40)
    members += start_members(["kafka-python", "confluent"], node.bootstrap, TOPIC, GROUP, n=2)
    late = LateMember(node.bootstrap, TOPIC, GROUP, name="late")
    late.start()
    members.append(late)
    settled(members, PARTITIONS, quiet_s=0.5)

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"http://{node.http}/groups/{GROUP}")
    page.wait_for_function("document.querySelectorAll('#members tbody tr').length === 3")
    before = api(node, f"/v1/groups/{GROUP}")["generation"]

    late.late = True
    joining = ConfluentMember(node.bootstrap, TOPIC, GROUP, name="new")
    joining.start()
    members.append(joining)
    settled(members, PARTITIONS, quiet_s=0.3)
    group = wait_for(lambda: (g := api(node, f"/v1/groups/{GROUP}"))["state"] == "Stable" and g, what="stable")
    (entry,) = [r for r in group["rebalances"] if r["from_generation"] == before]
    generation = entry["generation"]
    assert generation == before + 1 and entry["cause"] == "member-join" and "cf-new-" in entry["reason"]

    # the page was not reloaded: its polling shows the new generation
    card = page.locator(f'#timeline .rebalance[data-generation="{generation}"]')
    card.wait_for(timeout=10_000)
    assert card.locator(".cause").inner_text() == "member-join"
    card.locator(".outcome", has_text="stable").wait_for(timeout=5000)
    page.wait_for_function("document.querySelectorAll('#members tbody tr').length === 4")
    assert page.locator("#group-title").inner_text() == GROUP
    assert page.locator(".facts").inner_text().count("Stable") == 1
    assert entry["member_id"].startswith("cf-new-")
    (slow,) = [m for m in entry["late"] if m["member_id"].startswith("ak-late-")]
    assert slow["after_ms"] >= LATE_S * 1000 * 0.9
    assert entry["late"][0] == slow  # the latest first
    chip = card.locator(".late-member", has_text="ak-late-")
    chip.wait_for(timeout=5000)
    assert chip.inner_text().endswith(" s") and "+1." in chip.inner_text()  # e.g. "ak-late-1a2b3c4d +1.52 s"

    shot = tmp_path / "console-group.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("HERD_CONSOLE_SCREENSHOT"):
        target = Path(os.environ["HERD_CONSOLE_SCREENSHOT"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target)

    page.goto(f"http://{node.http}/")
    row = page.locator(f'#groups tr[data-group="{GROUP}"]')
    row.wait_for()
    assert "Stable" in row.inner_text() and row.locator("a").get_attribute("href") == f"/groups/{GROUP}"
    page.goto(f"http://{node.http}/topics")
    page.locator(f'section.topic[data-topic="{TOPIC}"] tbody tr').nth(PARTITIONS - 1).wait_for()
    page.close()


def test_the_timeline_draws_phases_late_and_dropped_members_of_each_rebalance(node, browser):
    """The page from a group document given to the browser (its `rebalances` entries, docs/observability.md): a
    running rebalance, one with late members (their delay, a tick on the join bar) and dropped ones, bars scaled
    by duration."""
    member = "kp-a-8f14e45f-ceea-467f-a8f5-6d4b5a1c0b2e"
    late = {
        "member_id": "ak-slow-c9f0f895-fb98-4b91-9a5a-0c5b7e6d1e2f",
        "group_instance_id": "slow-1",
        "after_ms": 1830,
    }
    entries = [
        _entry(4, 3, "member-join", join_ms=200, sync_ms=20, outcome="stable", member_id=member),
        _entry(
            5,
            4,
            "session-timeout",
            join_ms=2000,
            sync_ms=50,
            outcome="stable",
            late=[late],
            dropped=[
                {
                    "member_id": "cf-gone-45c48cce-2e2d-4fbd-a1b2-3c4d5e6f7a8b",
                    "group_instance_id": None,
                    "phase": "join",
                }
            ],
        ),
        _entry(None, 5, "member-leave", join_ms=None, sync_ms=None, outcome=None),
    ]
    document = {
        "group": "drawn",
        "state": "PreparingRebalance",
        "protocol_type": "consumer",
        "protocol": "range",
        "generation": 5,
        "members": [],
        "coordinator": 0,
        "lag": None,
        "leader": None,
        "partitions": [],
        "rebalances": entries,
    }
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/v1/groups/drawn", lambda route: route.fulfill(json=document))
    page.goto(f"http://{node.http}/groups/drawn")
    page.locator("#timeline .rebalance").nth(2).wait_for()
    cards = page.locator("#timeline .rebalance")
    assert [cards.nth(i).get_attribute("data-generation") for i in range(3)] == ["", "5", "4"]  # newest first
    assert "running" in cards.nth(0).get_attribute("class") and cards.nth(0).locator(".phase.open").count() == 1
    slow = cards.nth(1)
    assert slow.locator(".cause").inner_text() == "session-timeout"
    assert slow.locator(".late-member").inner_text() == "ak-slow-c9f0f895 (slow-1) +1.83 s"
    assert slow.locator(".dropped-member").inner_text() == "cf-gone-45c48cce (join)"
    assert slow.locator(".phase.join .tick").count() == 1
    widths = [
        page.evaluate("e => e.getBoundingClientRect().width", cards.nth(i).locator(".phase.join").element_handle())
        for i in (1, 2)
    ]
    assert widths[0] == pytest.approx(widths[1] * 10, rel=0.05)  # 2000 ms against 200 ms
    assert cards.nth(2).locator(".by").inner_text() == "by kp-a-8f14e45f"
    page.close()


def test_a_consumer_group_page_shows_epochs_states_and_targets(node, browser, members):
    """A KIP-848 consumer group: a confluent-kafka member on group.protocol=consumer, then a kafka-python member
    that joins with the classic protocol. The list names the group's type; its page shows the group and assignment
    epochs, each member's protocol, epoch, state and target, and the epoch bump the newcomer caused, its target
    assignment and reconciliation."""
    group_id, topic = "console-848", "console-848-orders"
    create_topic(node.bootstrap, topic, PARTITIONS)
    members += start_members(
        ["confluent-consumer"], node.bootstrap, topic, group_id, n=1, prefix="c", assignor="uniform"
    )
    wait_for(lambda: members[-1].assigned, what="the consumer-protocol member's partitions")
    members += start_members(["kafka-python"], node.bootstrap, topic, group_id, n=1, prefix="k")
    mine = [m for m in members if m.group == group_id]
    settled(mine, PARTITIONS, quiet_s=0.5)
    group = wait_for(
        lambda: (g := api(node, f"/v1/groups/{group_id}"))["state"] == "Stable" and g, what="a stable consumer group"
    )

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"http://{node.http}/groups/{group_id}")
    page.wait_for_function("document.querySelectorAll('#members tbody tr').length === 2")
    facts = page.locator(".facts").inner_text().lower()  # the terms are upper-cased by the style sheet
    assert "consumer (kip-848)" in facts and "group epoch" in facts and "assignment epoch" in facts
    classic = page.locator('#members tr[data-protocol="classic"]')
    assert classic.locator(".epoch").inner_text() == str(group["generation"])
    assert classic.locator(".member-state").inner_text() == "STABLE"
    kp = next(m for m in mine if m.client == "kafka-python")
    assert classic.locator(".target").inner_text() == f"{topic}: {', '.join(str(p) for p in sorted(kp.assigned))}"
    joined = [r for r in group["rebalances"] if r["cause"] == "member-join" and r["outcome"] == "stable"][-1]
    card = page.locator(f'#timeline .rebalance[data-generation="{joined["generation"]}"]')
    card.wait_for(timeout=10_000)
    assert card.locator(".gen-number").inner_text() == f"epoch {joined['generation']}"
    assert card.locator(".bar-label").inner_text().startswith("assign ") and " · reconcile " in card.inner_text()

    page.goto(f"http://{node.http}/")
    row = page.locator(f'#groups tr[data-group="{group_id}"]')
    row.wait_for()
    assert row.locator(".type").inner_text() == "consumer" and "consumer / uniform" in row.inner_text()
    page.close()


def _entry(
    generation: int | None,
    from_generation: int,
    cause: str,
    *,
    join_ms: int | None,
    sync_ms: int | None,
    outcome: str | None,
    member_id: str | None = None,
    late: list[Any] = (),
    dropped: list[Any] = (),
) -> dict[str, Any]:
    started = 1_795_000_000_000 + from_generation * 10_000
    return {
        "generation": generation,
        "from_generation": from_generation,
        "cause": cause,
        "reason": f"{cause} (a test's words)",
        "member_id": member_id,
        "group_instance_id": None,
        "started_ms": started,
        "join_completed_ms": None if join_ms is None else started + join_ms,
        "completed_ms": None if sync_ms is None else started + join_ms + sync_ms,
        "join_ms": join_ms,
        "sync_ms": sync_ms,
        "protocol": "range",
        "leader": None,
        "members": [],
        "late": list(late),
        "dropped": list(dropped),
        "outcome": outcome,
    }


def test_a_share_group_page_shows_members_and_share_partitions(node, browser):
    """A KIP-932 share group's page, from its document (views.py's shape, docs/observability.md): its epochs and
    assignor, each member's epoch and partitions, and each share partition's start offset, lag and records in
    flight by state."""
    member = "GsyU8IT+R/yTNr2MjT4X3A"
    document = {
        "group": "queue",
        "type": "share",
        "state": "Stable",
        "protocol_type": "share",
        "protocol": "simple",
        "generation": 4,
        "assignment_epoch": 4,
        "members": [
            {
                "member_id": member,
                "group_instance_id": None,
                "client_id": "reader",
                "client_host": "/127.0.0.1",
                "member_epoch": 4,
                "assignment": [{"topic": "jobs", "partitions": [0, 1]}],
            }
        ],
        "coordinator": 0,
        "lag": 6,
        "last_rebalance": None,
        "leader": None,
        "partitions": [
            {
                "topic": "jobs",
                "partition": 0,
                "start_offset": 4,
                "end_offset": 10,
                "lag": 6,
                "available": 0,
                "acquired": 6,
                "acknowledged": 0,
                "archived": 0,
            },  # fmt: skip
            {
                "topic": "jobs",
                "partition": 1,
                "start_offset": None,
                "end_offset": 0,
                "lag": None,
                "available": None,
                "acquired": None,
                "acknowledged": None,
                "archived": None,
            },  # fmt: skip
        ],
        "rebalances": [],
    }
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/v1/groups/queue", lambda route: route.fulfill(json=document))
    page.goto(f"http://{node.http}/groups/queue")
    page.locator("#share-partitions tbody tr").nth(1).wait_for()
    facts = page.locator(".facts").inner_text().lower()  # the terms are upper-cased by the style sheet
    assert "share (kip-932)" in facts and "simple" in facts
    row = page.locator(f'#members tr[data-member="{member}"]')
    assert row.locator(".epoch").inner_text() == "4" and "jobs: 0, 1" in row.inner_text()
    first = page.locator('#share-partitions tr[data-partition="jobs-0"]')
    assert first.locator(".lag").inner_text() == "6" and first.locator(".acquired").inner_text() == "6"
    unknown = page.locator('#share-partitions tr[data-partition="jobs-1"]')
    assert unknown.locator(".acquired").inner_text() == "–"  # another node leads it
    page.close()
