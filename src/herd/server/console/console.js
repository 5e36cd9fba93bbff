// herd's web console: plain JavaScript, no build step, no network access beyond this node's own JSON API.
//
// One page for three paths: "/" (the groups), "/groups/<group>" (one group: members, lag, rebalance timeline) and
// "/topics". Every POLL_MS it fetches the JSON the path needs (/v1/groups, /v1/groups/<group>, /v1/topics) and
// renders it again; every text goes into the page through textContent, never as HTML.
"use strict";

const POLL_MS = 2000;
const main = document.getElementById("main");
const statusLine = document.getElementById("status");

// -- small helpers ----------------------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "style") el.setAttribute("style", value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

function ms(n) {
  if (n === null || n === undefined) return "–";
  return n < 1000 ? `${n} ms` : `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
}

function clock(epochMs) {
  if (!epochMs) return "–";
  const d = new Date(epochMs);
  const pad = (x, w = 2) => String(x).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

// "clientId-<uuid>" -> "clientId-1a2b3c4d" (the full id in the title)
function shortMember(id) {
  if (!id) return "–";
  const m = /^(.*)-([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.exec(id);
  return m ? `${m[1]}-${m[2]}` : id;
}

const memberLabel = (id, instance) => h("span", { class: "member", title: id || "" },
  shortMember(id), instance ? h("span", { class: "instance" }, ` (${instance})`) : null);

const stateBadge = (state) => h("span", { class: `badge state-${(state || "unknown").toLowerCase()}` }, state || "?");

const groupHref = (group) => "/groups/" + encodeURIComponent(group);

function causeClass(cause) {
  if (!cause) return "cause";
  if (/timeout|dropped|failure|over-capacity/.test(cause)) return "cause cause-bad";
  if (/leave|removal|replaced/.test(cause)) return "cause cause-leave";
  if (/join|expected|moved/.test(cause)) return "cause cause-join";
  return "cause";
}

// a header ending in "#" heads a column of numbers (right-aligned)
function table(headers, rows, attrs) {
  const th = (x) => (x.endsWith("#") ? h("th", { class: "num" }, x.slice(0, -1)) : h("th", {}, x));
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, headers.map(th))), h("tbody", {}, rows));
}

function notice(text, kind) {
  return h("p", { class: `notice ${kind || ""}` }, text);
}

function unreachableNotes(unreachable) {
  return (unreachable || []).map((u) => notice(
    `Node ${u.node_id}${u.url ? ` (${u.url})` : ""} did not answer: ${u.error}. Its groups are not listed.`,
    "warn unreachable"));
}

// -- pages ------------------------------------------------------------------------------------------------------

function ago(epochMs) {
  const s = Math.max(0, Math.round((Date.now() - epochMs) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return s < 172800 ? `${Math.round(s / 3600)} h ago` : `${Math.round(s / 86400)} days ago`;
}

function lastRebalance(r) {
  if (!r) return h("span", { class: "muted" }, "–");
  const running = r.outcome === null || r.outcome === undefined;
  return h("span", {}, h("span", { class: causeClass(r.cause) }, r.cause), " ",
    h("span", { class: "muted" }, running ? "running…" : ago(r.completed_ms || r.started_ms)));
}

function renderGroups(data) {
  const rows = data.groups.map((g) => h("tr", { "data-group": g.group },
    h("td", {}, h("a", { href: groupHref(g.group) }, g.group)),
    h("td", {}, stateBadge(g.state)),
    h("td", { class: "type" }, g.type || "classic"),
    h("td", {}, [g.protocol_type, g.protocol].filter(Boolean).join(" / ") || "–"),
    h("td", { class: "num" }, num(g.members)),
    h("td", { class: "num" }, num(g.generation)),
    h("td", { class: "num coordinator" }, `node ${g.coordinator}`),
    h("td", { class: "num lag" }, num(g.lag)),
    h("td", { class: "last" }, lastRebalance(g.last_rebalance))));
  return [
    h("h1", {}, "Consumer groups"),
    ...unreachableNotes(data.unreachable),
    data.groups.length
      ? table(["Group", "State", "Type", "Protocol", "Members#", "Generation#", "Coordinator#", "Lag#", "Last rebalance"],
        rows,
        { id: "groups", class: "grid" })
      : notice("No groups yet."),
  ];
}

function renderMembers(g) {
  if (!g.members.length) return notice("No members.");
  if (g.type === "consumer") return renderConsumerMembers(g);
  if (g.type === "share") return renderShareMembers(g);
  const rows = g.members.map((m) => h("tr", { "data-member": m.member_id },
    h("td", {}, memberLabel(m.member_id, m.group_instance_id),
      m.member_id === g.leader ? h("span", { class: "leader", title: "the group's leader" }, " ★") : null),
    h("td", {}, m.client_id),
    h("td", {}, m.client_host),
    h("td", { class: "assignment" }, assignmentText(m.assignment))));
  return table(["Member", "Client id", "Host", "Partitions"], rows, { id: "members", class: "grid" });
}

// a KIP-848 consumer group's members: each with its epoch, reconciliation state, and current and target partitions
function renderConsumerMembers(g) {
  const rows = g.members.map((m) => h("tr", { "data-member": m.member_id, "data-protocol": m.protocol },
    h("td", {}, memberLabel(m.member_id, m.group_instance_id)),
    h("td", { class: "protocol" }, m.protocol),
    h("td", { class: "num epoch" }, num(m.member_epoch)),
    h("td", { class: "member-state" }, m.member_state),
    h("td", {}, m.client_id),
    h("td", {}, m.client_host),
    h("td", { class: "assignment" }, assignmentText(m.assignment)),
    h("td", { class: "target" }, assignmentText(m.target_assignment))));
  return table(["Member", "Protocol", "Epoch#", "State", "Client id", "Host", "Partitions", "Target"], rows,
    { id: "members", class: "grid" });
}

// a KIP-932 share group's members: each with its epoch and the partitions it shares
function renderShareMembers(g) {
  const rows = g.members.map((m) => h("tr", { "data-member": m.member_id },
    h("td", {}, memberLabel(m.member_id)),
    h("td", { class: "num epoch" }, num(m.member_epoch)),
    h("td", {}, m.client_id),
    h("td", {}, m.client_host),
    h("td", { class: "assignment" }, assignmentText(m.assignment))));
  return table(["Member", "Epoch#", "Client id", "Host", "Partitions"], rows, { id: "members", class: "grid" });
}

// a share group's partitions: where it starts, how far behind it is, and its records in flight by state
function renderSharePartitions(g) {
  if (!g.partitions.length) return notice("No share partition initialized yet.");
  const rows = g.partitions.map((p) => h("tr", { "data-partition": `${p.topic}-${p.partition}` },
    h("td", {}, p.topic),
    h("td", { class: "num" }, p.partition),
    h("td", { class: "num" }, num(p.start_offset)),
    h("td", { class: "num" }, num(p.end_offset)),
    h("td", { class: "num lag" }, num(p.lag)),
    ...["available", "acquired", "acknowledged", "archived"].map((k) => h("td", { class: `num ${k}` }, num(p[k])))));
  return table(["Topic", "Partition#", "Start offset#", "End offset#", "Lag#", "Available#", "Acquired#",
    "Acknowledged#", "Archived#"], rows, { id: "share-partitions", class: "grid" });
}

function assignmentText(assignment) {
  if (assignment === null || assignment === undefined) return h("span", { class: "muted" }, "not decoded");
  if (!assignment.length) return h("span", { class: "muted" }, "none");
  return assignment.map((a) => `${a.topic}: ${a.partitions.join(", ")}`).join("; ");
}

function renderLag(g) {
  if (!g.partitions.length) return notice("No committed offsets.");
  const most = g.partitions.reduce((m, p) => Math.max(m, p.lag || 0), 1);  // no spread: any number of partitions
  const rows = g.partitions.map((p) => h("tr", { "data-partition": `${p.topic}-${p.partition}` },
    h("td", {}, p.topic),
    h("td", { class: "num" }, p.partition),
    h("td", {}, p.member_id ? memberLabel(p.member_id) : h("span", { class: "muted" }, "unassigned")),
    h("td", { class: "num" }, num(p.committed)),
    h("td", { class: "num" }, num(p.end_offset)),
    h("td", { class: "num lag" }, num(p.lag)),
    h("td", { class: "lagbar" }, h("span", { style: `width:${Math.max(0, (p.lag || 0) / most) * 100}%` }))));
  return table(["Topic", "Partition#", "Member", "Committed#", "End offset#", "Lag#", ""], rows,
    { id: "lag", class: "grid" });
}

function renderTimeline(rebalances) {
  if (!rebalances.length) return notice("No rebalance recorded yet.");
  const total = (r) => (r.join_ms || 0) + (r.sync_ms || 0);
  const scale = Math.max(1, ...rebalances.map(total));
  const newestFirst = [...rebalances].reverse();
  return h("ol", { id: "timeline", class: "timeline" }, newestFirst.map((r) => renderRebalance(r, scale)));
}

function renderRebalance(r, scale) {
  const running = r.outcome === null || r.outcome === undefined;
  const late = r.late || [];
  const dropped = r.dropped || [];
  const pct = (x) => `${Math.min(100, Math.max(0.5, ((x || 0) / scale) * 100))}%`;
  const open = r.join_ms === null || r.join_ms === undefined;
  // a join phase still open is drawn for as long as it has lasted so far (by this browser's clock)
  const joinMs = open && running ? Math.max(0, Date.now() - r.started_ms) : r.join_ms;
  const joinBar = h("span", { class: `phase join${open ? " open" : ""}`, style: `width:${pct(joinMs)}`,
    title: `join phase ${open ? "running" : ms(r.join_ms)}` });
  for (const l of late) {
    if (l.after_ms !== null && l.after_ms !== undefined && r.join_ms) {
      joinBar.append(h("span", { class: "tick", style: `left:${Math.min(100, (l.after_ms / r.join_ms) * 100)}%`,
        title: `${l.member_id} joined ${ms(l.after_ms)} after the first` }));
    }
  }
  // a consumer group's epoch bump: the new target assignment, then every member reconciling to it
  const [joinWord, syncWord] = r.group_type === "consumer" ? ["assign", "reconcile"] : ["join", "sync"];
  joinBar.setAttribute("title", `${joinWord} phase ${open ? "running" : ms(r.join_ms)}`);
  const syncBar = r.sync_ms === null || r.sync_ms === undefined ? null
    : h("span", { class: "phase sync", style: `width:${pct(r.sync_ms)}`, title: `${syncWord} phase ${ms(r.sync_ms)}` });
  return h("li", { class: `rebalance${running ? " running" : ""}`, "data-generation": r.generation ?? "" },
    h("div", { class: "gen" },
      h("span", { class: "gen-number" }, r.generation === null || r.generation === undefined ? "…"
        : `${r.group_type === "consumer" ? "epoch" : "gen"} ${r.generation}`),
      h("span", { class: "gen-from" }, `from ${r.from_generation}`)),
    h("div", { class: "body" },
      h("div", { class: "headline" },
        h("span", { class: causeClass(r.cause) }, r.cause),
        r.member_id ? h("span", { class: "by" }, "by ", memberLabel(r.member_id, r.group_instance_id)) : null,
        h("span", { class: "when" }, clock(r.started_ms)),
        h("span", { class: "outcome" }, running ? "running…" : r.outcome)),
      r.reason ? h("div", { class: "reason" }, r.reason) : null,
      h("div", { class: "bars" }, h("div", { class: "track" }, joinBar, syncBar),
        h("span", { class: "bar-label" }, open && running ? `${joinWord}ing… ${ms(joinMs)}`
          : `${joinWord} ${ms(r.join_ms)} · ${syncWord} ${running ? "…" : ms(r.sync_ms)}`)),
      h("div", { class: "people" },
        h("span", { class: "count", title: (r.members || []).map(memberLine).join("\n") },
          `${(r.members || []).length} members`),
        late.length ? h("span", { class: "late" }, "late: ", late.map((l) => h("span", { class: "late-member chip",
          title: l.member_id }, shortMember(l.member_id), l.group_instance_id ? ` (${l.group_instance_id})` : "",
          l.after_ms !== null && l.after_ms !== undefined ? h("b", {}, ` +${ms(l.after_ms)}`) : null))) : null,
        dropped.length ? h("span", { class: "dropped" }, "dropped: ", dropped.map((d) => h("span", {
          class: "dropped-member chip", title: d.member_id }, shortMember(d.member_id), ` (${d.phase})`))) : null)));
}

// one member of a rebalance (interface 1: an object with its assignment size; before it, an id)
function memberLine(m) {
  if (typeof m === "string") return m;
  const partitions = m.partitions === null || m.partitions === undefined ? "" : `, ${m.partitions} partitions`;
  return `${m.member_id}${m.group_instance_id ? ` (${m.group_instance_id})` : ""}${partitions}`;
}

function renderGroup(g) {
  if (g.type === "share") {
    const shareFacts = [
      ["State", stateBadge(g.state)], ["Type", "share (KIP-932)"], ["Group epoch", num(g.generation)],
      ["Assignment epoch", num(g.assignment_epoch)], ["Assignor", g.protocol || "–"],
      ["Members", num(g.members.length)], ["Coordinator", `node ${g.coordinator}`], ["Lag", num(g.lag)],
    ];
    return [
      h("p", { class: "crumbs" }, h("a", { href: "/" }, "Groups"), " / "),
      h("h1", { id: "group-title" }, g.group),
      h("dl", { class: "facts" }, shareFacts.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))),
      h("h2", {}, "Members"), renderMembers(g),
      h("h2", {}, "Share partitions"), renderSharePartitions(g),
    ];
  }
  const facts = g.type === "consumer" ? [
    ["State", stateBadge(g.state)], ["Type", "consumer (KIP-848)"], ["Group epoch", num(g.generation)],
    ["Assignment epoch", num(g.assignment_epoch)], ["Assignor", g.protocol || "–"],
    ["Members", num(g.members.length)], ["Coordinator", `node ${g.coordinator}`], ["Lag", num(g.lag)],
  ] : [
    ["State", stateBadge(g.state)], ["Generation", num(g.generation)],
    ["Protocol", [g.protocol_type, g.protocol].filter(Boolean).join(" / ") || "–"],
    ["Members", num(g.members.length)], ["Leader", g.leader ? memberLabel(g.leader) : "–"],
    ["Coordinator", `node ${g.coordinator}`], ["Lag", num(g.lag)],
  ];
  return [
    h("p", { class: "crumbs" }, h("a", { href: "/" }, "Groups"), " / "),
    h("h1", { id: "group-title" }, g.group),
    h("dl", { class: "facts" }, facts.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))),
    h("h2", {}, "Rebalances"), renderTimeline(g.rebalances || []),
    h("h2", {}, "Members"), renderMembers(g),
    h("h2", {}, "Lag per partition"), renderLag(g),
  ];
}

function renderTopics(data, showInternal) {
  const toggle = h("label", { class: "toggle" }, h("input", { type: "checkbox", id: "show-internal",
    checked: showInternal }), " internal topics");
  toggle.querySelector("input").addEventListener("change", (e) => {
    state.showInternal = e.target.checked;
    render();
  });
  const shown = data.topics.filter((t) => showInternal || !t.internal);
  const sections = shown.map((t) => {
    const size = t.partitions.reduce((a, p) => a + (p.size_bytes || 0), 0);
    const rows = t.partitions.map((p) => h("tr", {},
      h("td", { class: "num" }, p.partition),
      h("td", { class: "num" }, p.leader === null ? "none" : `node ${p.leader}`),
      h("td", { class: "num" }, num(p.start_offset)),
      h("td", { class: "num" }, num(p.end_offset)),
      h("td", { class: "num" }, p.end_offset === null ? "–" : num(p.end_offset - p.start_offset)),
      h("td", { class: "num" }, bytes(p.size_bytes))));
    return h("section", { class: "topic", "data-topic": t.topic },
      h("h2", {}, t.topic, h("span", { class: "muted" },
        ` · ${t.partitions.length} partitions · ${bytes(size)}${t.internal ? " · internal" : ""}`)),
      table(["Partition#", "Leader#", "Start offset#", "End offset#", "Records#", "Size#"], rows, { class: "grid" }));
  });
  return [h("div", { class: "title-row" }, h("h1", {}, "Topics"), toggle),
    ...(sections.length ? sections : [notice("No topics yet.")])];
}

// -- routing and polling ----------------------------------------------------------------------------------------

const state = { data: null, error: null, showInternal: false };

function route() {
  const path = location.pathname;
  if (path.startsWith("/groups/")) {
    const group = decodeURIComponent(path.slice("/groups/".length));
    return { page: "group", api: "/v1/groups/" + encodeURIComponent(group), group };
  }
  if (path === "/topics") return { page: "topics", api: "/v1/topics" };
  return { page: "groups", api: "/v1/groups" };
}

const current = route();
for (const a of document.querySelectorAll("nav a")) {
  if (a.dataset.nav === (current.page === "topics" ? "topics" : "groups")) a.classList.add("active");
}
document.title = current.page === "group" ? `${current.group} · herd` : `${current.page} · herd`;

function render() {
  let content;
  if (state.error && !state.data) content = [notice(state.error, "error")];
  else if (!state.data) return;
  else if (current.page === "groups") content = renderGroups(state.data);
  else if (current.page === "topics") content = renderTopics(state.data, state.showInternal);
  else content = renderGroup(state.data);
  if (state.error && state.data) content.unshift(notice(state.error, "error"));
  main.replaceChildren(...content);
}

let timer = null;

async function refresh() {
  clearTimeout(timer);
  if (document.hidden) return; // a hidden tab asks nothing; it refreshes when shown again
  try {
    const response = await fetch(current.api, { headers: { Accept: "application/json" }, cache: "no-store" });
    const body = await response.json();
    if (!response.ok) {
      state.data = null;
      state.error = body && body.error ? body.error : `HTTP ${response.status}`;
    } else {
      state.data = body;
      state.error = null;
    }
    statusLine.textContent = `updated ${clock(Date.now()).slice(0, 8)}`;
    statusLine.className = "status ok";
  } catch (e) {
    state.error = `cannot reach the node: ${e.message}`;
    statusLine.textContent = "disconnected";
    statusLine.className = "status bad";
  }
  render();
  clearTimeout(timer);
  timer = setTimeout(refresh, POLL_MS);
}

document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
refresh();
