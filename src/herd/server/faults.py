"""Fault injection on a running node: the rules users set (over HTTP, herd.server.http) and their matching.

A rule names an action (error, delay, drop, stall) and filters (API, group, topic, member, client id); see
docs/faults.md for each and the real situation it stands for. `parse_rule(dict)` checks a rule as the HTTP API
receives it and raises RuleError with one line for the user: the API must be one herd serves (Kafka's name, e.g.
"OffsetCommit", or its key), an error must be one Kafka can answer that API with (herd.server.fault_answers
.ERRORS), a group/member/topic filter only goes with APIs whose requests carry one.

`FaultRegistry` holds the rules of this node. It exists only with herd.faults.enable=true, as `broker.faults`;
otherwise that is None and the connection's hook costs one attribute test per request (`Connection._on_frame`
consults the registry only when it is not None). `match(api_key, header, request)`
returns the first rule (in the order they were added) whose filters all match the decoded request and whose
probability draw (a per-rule `random.Random(seed)`, drawn only for requests the filters matched, so a seeded run
is reproducible) succeeds; it counts the hit and removes a rule whose `count` is used up. A stall waits on
`rule.released`, set when the user removes the rule (or clears them all, which also ends stalls still running
for rules that their count removed).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from herd.protocol.messages import RequestHeader
from herd.server.apis import table
from herd.server.broker import Broker
from herd.server.fault_answers import ERRORS, error_name, error_response

ACTIONS = ("error", "delay", "drop", "stall")
MAX_RULES = 1000
MAX_DELAY_MS = 3_600_000
_FIELDS = frozenset(
    {
        "action",
        "api",
        "group",
        "topic",
        "member",
        "client_id",
        "error",
        "delay_ms",
        "when",
        "count",
        "probability",
        "seed",
    }
)

# Which requests carry a group id, a member (member id or group instance id) or a topic name
GROUP_APIS = frozenset({8, 9, 10, 11, 12, 13, 14, 15, 28, 42, 47})
MEMBER_APIS = frozenset({8, 9, 11, 12, 13, 14, 28})
TOPIC_APIS = frozenset({0, 1, 2, 3, 8, 9, 19, 20, 23, 28, 37, 47})


class RuleError(ValueError):
    """A rule the registry refuses; the message is one line for the user."""


def api_names() -> dict[str, int]:
    """Kafka's API names (e.g. "OffsetCommit") of the APIs herd serves -> key."""
    return {"".join(part.capitalize() for part in spec.name.split("_")): key for key, spec in table().items()}


@dataclass(eq=False)
class Rule:
    id: int
    action: str
    api: int | None = None
    group: str | None = None
    topic: str | None = None
    member: str | None = None
    client_id: str | None = None
    error: int | None = None
    delay_ms: int | None = None
    when: str = "before"
    count: int | None = None
    probability: float = 1.0
    seed: int | None = None
    hits: int = 0
    random: random.Random = field(default_factory=random.Random, repr=False)
    released: asyncio.Event = field(default_factory=asyncio.Event, repr=False)  # set when the user removes it

    def to_json(self) -> dict[str, Any]:
        names = {key: name for name, key in api_names().items()}
        out: dict[str, Any] = {
            "id": self.id,
            "action": self.action,
            "api": names.get(self.api) if self.api is not None else None,
        }
        for name in ("group", "topic", "member", "client_id", "delay_ms", "count", "seed"):
            out[name] = getattr(self, name)
        out["error"] = error_name(self.error) if self.error is not None else None
        out["when"] = self.when if self.action == "drop" else None
        out["probability"] = self.probability
        out["hits"] = self.hits
        return out


def parse_rule(data: Any, rule_id: int) -> Rule:
    """A checked rule from its JSON form; raises RuleError."""
    if not isinstance(data, dict):
        raise RuleError("a fault rule is a JSON object")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise RuleError(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(_FIELDS))})")
    action = data.get("action")
    if action not in ACTIONS:
        raise RuleError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    rule = Rule(rule_id, action, api=_api(data.get("api")))
    for name in ("group", "topic", "member", "client_id"):
        setattr(rule, name, _text(data, name))
    _check_filters(rule)
    rule.error = _error(rule, data.get("error"))
    rule.delay_ms = _delay(rule, data)
    rule.when = _when(rule, data.get("when"))
    rule.count = _whole(data, "count", 1, 2**31 - 1)
    rule.probability = _probability(data.get("probability", 1.0))
    rule.seed = _whole(data, "seed", -(2**63), 2**63 - 1)
    rule.random = random.Random(rule.seed)
    return rule


def _api(value: Any) -> int | None:
    if value is None:
        return None
    names = api_names()
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise RuleError(f"api must be a Kafka API name or key, got {value!r}")
    if isinstance(value, int):
        if value not in table():
            raise RuleError(f"API key {value} is not served by herd")
        return value
    folded = {name.lower(): key for name, key in names.items()}
    key = folded.get(value.replace("_", "").lower())
    if key is None:
        raise RuleError(f"unknown API {value!r} (herd serves {', '.join(sorted(names))})")
    return key


def _text(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise RuleError(f"{name} must be a string, got {value!r}")
    return value


def _check_filters(rule: Rule) -> None:
    if rule.api is None:
        return
    for filter_name, apis in (("group", GROUP_APIS), ("member", MEMBER_APIS), ("topic", TOPIC_APIS)):
        if getattr(rule, filter_name) is not None and rule.api not in apis:
            raise RuleError(f"{_kafka_name(rule.api)} requests carry no {filter_name}")


def _kafka_name(key: int) -> str:
    return {k: n for n, k in api_names().items()}[key]


def _error(rule: Rule, value: Any) -> int | None:
    if rule.action != "error":
        if value is not None:
            raise RuleError(f"error goes with action error, not {rule.action}")
        return None
    if rule.api is None:
        raise RuleError("action error needs an api (the error must be one Kafka answers that API with)")
    allowed = ERRORS.get(rule.api)
    if allowed is None:
        covered = ", ".join(sorted(_kafka_name(k) for k in ERRORS))
        raise RuleError(
            f"injecting errors into {_kafka_name(rule.api)} is not supported (supported: {covered}); "
            "delay, drop and stall work for every API"
        )
    code = _error_code(value)
    if code not in allowed:
        names = ", ".join(sorted(error_name(c) for c in allowed))
        raise RuleError(
            f"Kafka does not answer {_kafka_name(rule.api)} with {error_name(code)} (it can answer: {names})"
        )
    return code


def _error_code(value: Any) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            return ErrorCode(value).value
        if isinstance(value, str):
            return ErrorCode[value.strip().lower()].value
    except (KeyError, ValueError):
        pass
    raise RuleError(f"error must be a Kafka error name (e.g. NOT_COORDINATOR) or code, got {value!r}")


def _delay(rule: Rule, data: dict[str, Any]) -> int | None:
    if rule.action not in ("delay", "stall"):
        if data.get("delay_ms") is not None:
            raise RuleError(f"delay_ms goes with action delay or stall, not {rule.action}")
        return None
    if rule.action == "delay" and data.get("delay_ms") is None:
        raise RuleError("action delay needs delay_ms")
    return _whole(data, "delay_ms", 0, MAX_DELAY_MS)


def _when(rule: Rule, value: Any) -> str:
    if value is None:
        return "before"
    if rule.action != "drop":
        raise RuleError(f"when goes with action drop, not {rule.action}")
    if value not in ("before", "after"):
        raise RuleError(f"when must be before or after, got {value!r}")
    return value


def _whole(data: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RuleError(f"{name} must be a whole number in [{low}, {high}], got {value!r}")
    return value


def _probability(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise RuleError(f"probability must be a number in (0, 1], got {value!r}")
    return float(value)


# -- what a request is about -----------------------------------------------------------------------------------


def request_groups(api_key: int, request: Any) -> Iterator[str]:
    if api_key in (8, 11, 12, 13, 14, 28, 47):
        yield request.group_id
    elif api_key == 9:
        if hasattr(request, "groups"):
            yield from (g.group_id for g in request.groups)
        else:
            yield request.group_id
    elif api_key == 15:
        yield from request.groups
    elif api_key == 42:
        yield from request.groups_names
    elif api_key == 10 and getattr(request, "key_type", 0) == 0:
        if hasattr(request, "coordinator_keys"):
            yield from request.coordinator_keys
        else:
            yield request.key


def request_members(api_key: int, request: Any) -> Iterator[str | None]:
    if api_key == 13 and hasattr(request, "members"):
        for m in request.members:
            yield m.member_id
            yield m.group_instance_id
    elif api_key == 9:
        yield from (getattr(g, "member_id", None) for g in getattr(request, "groups", ()))
    elif api_key in MEMBER_APIS:
        yield request.member_id
        yield getattr(request, "group_instance_id", None)


def _entries(api_key: int, request: Any) -> Any:
    if api_key == 0:
        return request.topic_data
    if api_key == 9:
        if hasattr(request, "groups"):
            return [t for g in request.groups for t in g.topics or ()]
        return request.topics or ()
    if api_key == 20 and hasattr(request, "topic_names"):
        return request.topic_names
    return request.topics or ()


def request_topics(broker: Broker, api_key: int, request: Any) -> Iterator[str]:
    """The topic names a request names (by name, or by id where the version uses ids)."""
    if api_key not in TOPIC_APIS:
        return
    if api_key == 3 and (request.topics is None or not request.topics and type(request).__version__ == 0):
        yield from (t.name for t in broker.cluster.topics())  # every topic
        return
    for entry in _entries(api_key, request):
        if isinstance(entry, str):
            yield entry
            continue
        name = getattr(entry, "name", None) or getattr(entry, "topic", None)
        if name is None and getattr(entry, "topic_id", None) is not None:
            topic = broker.cluster.by_id(entry.topic_id)
            name = topic.name if topic is not None else None
        if name is not None:
            yield name


class FaultRegistry:
    """The rules of one node; see the module's docstring."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.rules: list[Rule] = []
        self._expired_stalls: list[Rule] = []  # removed by their count, their stalls perhaps still running
        self._ids = itertools.count(1)

    def add(self, data: Any) -> Rule:
        """Check and add a rule; raises RuleError."""
        if len(self.rules) >= MAX_RULES:
            raise RuleError(f"this node already has {MAX_RULES} fault rules; remove some first")
        rule = parse_rule(data, next(self._ids))
        self.rules.append(rule)
        return rule

    def remove(self, rule_id: int) -> Rule | None:
        """Remove a rule (ending the stalls it holds); the rule, or None if there is none by that id."""
        for rule in self.rules:
            if rule.id == rule_id:
                self.rules.remove(rule)
                rule.released.set()
                return rule
        return None

    def clear(self) -> int:
        removed, self.rules = self.rules, []
        for rule in removed + self._expired_stalls:
            rule.released.set()
        self._expired_stalls.clear()
        return len(removed)

    def _expire(self, rule: Rule) -> None:
        self.rules.remove(rule)
        if rule.action == "stall" and rule.delay_ms is None:
            self._expired_stalls.append(rule)

    def match(self, api_key: int, header: RequestHeader, request: Any) -> Rule | None:
        """The rule to apply to this request, its hit counted (and removed when its count is used up)."""
        for rule in self.rules:
            if rule.api is not None and rule.api != api_key:
                continue
            if rule.error is not None and ERRORS[api_key][rule.error] > header.api_version:
                continue  # an error this version's clients cannot get (e.g. FENCED_INSTANCE_ID before KIP-345)
            if not self._matches(rule, api_key, header, request):
                continue
            if rule.probability < 1.0 and rule.random.random() >= rule.probability:
                continue
            rule.hits += 1
            if rule.count is not None and rule.hits >= rule.count:
                self._expire(rule)
            return rule
        return None

    def _matches(self, rule: Rule, api_key: int, header: RequestHeader, request: Any) -> bool:
        if rule.client_id is not None and header.client_id != rule.client_id:
            return False
        if rule.group is not None and rule.group not in request_groups(api_key, request):
            return False
        if rule.member is not None and rule.member not in request_members(api_key, request):
            return False
        if rule.topic is not None and rule.topic not in request_topics(self.broker, api_key, request):
            return False
        return True

    def error_response(self, rule: Rule, header: RequestHeader, request: Any) -> Any:
        assert rule.error is not None
        return error_response(
            self.broker,
            header.api_key,
            header.api_version,
            request,
            rule.error,
            client_id=header.client_id or "",
            rule_topic=rule.topic,
        )
