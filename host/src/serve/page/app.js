// Longhand's page. Everything it shows comes from the API and is put into
// the document as text (text nodes, attributes via setAttribute on fixed
// names) — never as HTML: event text is model and tool output. And every
// piece of that text goes through visible(), so a character that would be
// drawn as nothing, or would reorder what is drawn (a bidi override in a
// path a person is asked to approve), is shown as a marked ⟨U+202E⟩.
"use strict";

const TOKEN_KEY = "longhand.token";
const $ = (id) => document.getElementById(id);

// ---- the token -------------------------------------------------------------

function takeTokenFromUrl() {
  const m = /^#token=([^&]+)/.exec(location.hash);
  if (!m) return;
  localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  // Out of the address bar and the history at once.
  history.replaceState(null, "", location.pathname + "#/sessions");
}

function token() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

// ---- the API ---------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + token() };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    showLogin("The token was refused; paste the current one.");
    throw new ApiError(401, "unauthorized", "unauthorized");
  }
  const type = res.headers.get("Content-Type") || "";
  if (!res.ok) {
    let code = "http_" + res.status, message = res.statusText;
    if (type.startsWith("application/json")) {
      const e = await res.json();
      code = e.error.code;
      message = e.error.message;
    }
    throw new ApiError(res.status, code, message);
  }
  return type.startsWith("application/json") ? res.json() : res.arrayBuffer();
}

function showError(err) {
  const box = $("error");
  if (!err) {
    box.hidden = true;
    return;
  }
  if (err.code === "unauthorized") return;
  setText(box, err.code ? err.code + ": " + err.message : String(err));
  box.hidden = false;
  clearTimeout(showError.timer);
  showError.timer = setTimeout(() => { box.hidden = true; }, 8000);
}

// ---- text a person can trust ------------------------------------------------

// The characters shown as escapes, as [first, last] code points: the CLI's
// table (host/src/cli/term.rs, HIDDEN), written in here by the server, so
// the terminal and the page show the same text the same way.
const HIDDEN_RANGES = [/*HIDDEN_RANGES*/];
const HIDDEN = new RegExp(
  "[" + HIDDEN_RANGES.map(([a, b]) => "\\u{" + a.toString(16) + "}-\\u{" + b.toString(16) + "}").join("") + "]",
  "gu");

function codePoint(c) {
  return "U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
}

// `text` as document nodes: ordinary text as text nodes, each hidden
// character as a marked span saying which it is (never the character).
function visible(text) {
  text = String(text === undefined || text === null ? "" : text);
  const out = document.createDocumentFragment();
  let last = 0;
  for (const m of text.matchAll(HIDDEN)) {
    if (m.index > last) out.append(document.createTextNode(text.slice(last, m.index)));
    const name = codePoint(m[0]);
    const mark = document.createElement("span");
    mark.className = "hidden-char";
    mark.setAttribute("title", name + " is not shown as itself: it is invisible or reorders text");
    mark.textContent = "\u27e8" + name + "\u27e9";
    out.append(mark);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.append(document.createTextNode(text.slice(last)));
  return out;
}

// Replace what `node` shows with `text`, through visible().
function setText(node, text) {
  clear(node);
  node.append(visible(text));
}

// ---- small DOM helpers (text only) ---------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.append(visible(v));
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(typeof c === "string" ? visible(c) : c);
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function when(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toLocaleString();
}

function clock(ms) {
  return ms ? new Date(ms).toLocaleTimeString() : "";
}

function cost(spend) {
  const dollars = (spend.cost_micros || 0) / 1e6;
  if (spend.answers_without_price && !spend.cost_micros) return "?";
  return "$" + dollars.toFixed(4) + (spend.answers_without_price ? "+" : "");
}

function statusBadge(status) {
  return el("span", { class: "status status-" + status, text: status });
}

function short(text, n) {
  text = String(text === undefined || text === null ? "" : text);
  return text.length > n ? text.slice(0, n) + "…" : text;
}

// ---- views -------------------------------------------------------------

const VIEWS = ["login", "view-sessions", "view-session", "view-approvals", "view-memory"];
let current = { view: null, stop: () => {} };

function show(id) {
  for (const v of VIEWS) $(v).hidden = v !== id;
}

function showLogin(message) {
  current.stop();
  current = { view: "login", stop: () => {} };
  show("login");
  if (message) showError({ code: "token", message });
}

function route() {
  current.stop();
  current = { view: null, stop: () => {} };
  showError(null);
  if (!token()) return showLogin();
  const hash = location.hash || "#/sessions";
  let m;
  if ((m = /^#\/s\/(s-[0-9A-Za-z]+)$/.exec(hash))) return openSession(m[1]);
  if (hash === "#/approvals") return openApprovals();
  if (hash === "#/memory") return openMemory();
  return openSessions();
}

// ---- the session list -------------------------------------------------------

function openSessions() {
  show("view-sessions");
  let cursor = null;
  let timer = null;
  const load = async (more) => {
    const q = new URLSearchParams({ limit: "50" });
    if ($("status-filter").value) q.set("status", $("status-filter").value);
    if ($("agent-filter").value.trim()) q.set("agent", $("agent-filter").value.trim());
    if (more && cursor) q.set("cursor", cursor);
    try {
      const page = await api("GET", "/api/sessions?" + q);
      const body = $("sessions").tBodies[0];
      if (!more) clear(body);
      for (const s of page.sessions) body.append(sessionRow(s));
      cursor = page.next;
      $("sessions-more").hidden = !page.next;
      $("sessions-empty").hidden = body.rows.length > 0;
    } catch (e) {
      showError(e);
    }
  };
  $("status-filter").onchange = () => load(false);
  $("agent-filter").onchange = () => load(false);
  $("sessions-more").onclick = () => load(true);
  load(false);
  refreshApprovalCount();
  // The first page is kept fresh while it is shown.
  timer = setInterval(() => { if (!cursor || $("sessions-more").hidden) load(false); refreshApprovalCount(); }, 5000);
  current = { view: "sessions", stop: () => clearInterval(timer) };
}

function sessionRow(s) {
  const open = () => { location.hash = "#/s/" + s.id; };
  const row = el("tr", { "data-id": s.id, "data-status": s.status, onclick: open },
    el("td", { "data-label": "Session", class: "mono" }, el("a", { href: "#/s/" + s.id, text: s.id })),
    el("td", { "data-label": "Agent", text: s.agent }),
    el("td", { "data-label": "Status" }, statusBadge(s.status)),
    el("td", { "data-label": "Step", text: String(s.spend.steps) }),
    el("td", { "data-label": "Tokens", text: s.spend.input_tokens + " / " + s.spend.output_tokens }),
    el("td", { "data-label": "Cost", text: cost(s.spend) }),
    el("td", { "data-label": "Updated", text: when(s.updated_ms) }));
  if (s.parent) row.classList.add("child");
  return row;
}

async function refreshApprovalCount() {
  try {
    const a = await api("GET", "/api/approvals");
    setText($("approval-count"), a.approvals.length ? String(a.approvals.length) : "");
    return a.approvals;
  } catch (e) {
    return [];
  }
}

// ---- one session ---------------------------------------------------------

// What a timeline row says of an event, in one line.
function describe(e) {
  switch (e.type) {
    case "session_created": return "agent " + e.agent_name;
    case "goal_set": return e.goal;
    case "model_requested": return "step " + e.step + " → " + e.provider + "/" + e.model + (e.role && e.role !== "worker" ? " (" + e.role + ")" : "") + (e.attempt > 1 ? ", attempt " + e.attempt : "");
    case "model_responded": return "step " + e.step + " ← " + e.input_tokens + " in / " + e.output_tokens + " out, " + e.latency_ms + " ms, " + e.stop_reason + (e.calls && e.calls.length ? "; calls " + e.calls.join(", ") : "");
    case "model_failed": return "step " + e.step + " attempt " + e.attempt + ": " + e.error;
    case "tool_started": return e.component + "/" + e.tool + " [" + e.effect + "] " + e.call_id;
    case "tool_finished": {
      const r = e.receipt || {};
      const wall = r.wall_us !== undefined ? (r.wall_us / 1000).toFixed(2) + " ms" : "";
      return (e.ok ? "ok " : "error ") + e.call_id + (wall ? ", " + wall : "") + (r.fuel_used !== undefined ? ", fuel " + r.fuel_used : "");
    }
    case "tool_in_doubt": return e.call_id + ": " + e.reason;
    case "paused": return e.reason.kind + ": " + e.reason.detail;
    case "resumed": return (e.cause && e.cause !== "operator" ? e.cause : "") + (e.note ? " " + e.note : "") + (e.raised && Object.keys(e.raised).length ? " raised " + JSON.stringify(e.raised) : "");
    case "finished": return e.summary || "";
    case "failed": return e.error;
    case "snapshot": return "through #" + e.through_seq;
    case "plan_created": return "by the " + e.author + ": " + ((e.plan && e.plan.tasks) || []).length + " tasks";
    case "plan_revised": return "by the " + e.author + (e.accepted ? ", accepted: " : ", refused: ") + e.reason;
    case "task_started": return e.task + " attempt " + e.attempt + (e.child ? " in " + e.child : "");
    case "role_started": return e.role + (e.task ? " on " + e.task : "") + (e.check !== undefined ? " check " + e.check : "");
    case "check_finished": return e.task + " check " + e.check + " (" + e.kind + ") " + (e.passed ? "passed" : "failed") + ": " + e.detail;
    case "task_finished": return e.task + " " + e.status + " after " + e.attempts + " attempt(s)";
    case "handoff": return (e.task ? e.task + ": " : "") + "at " + e.context_tokens + " tokens, by the " + (e.by_model ? "model" : "harness");
    case "progress_noted": return e.task + ": " + e.text;
    case "memory_written": return e.id + " in " + e.scope + ": " + e.text;
    case "approval_requested": return e.request + " for " + e.tool + " [" + e.effect + "]";
    case "approval_granted": return e.request + " by " + e.by + " (" + e.scope + ")";
    case "approval_denied": return e.request + " by " + e.by + ": " + e.reason;
    case "steered": return e.kind + " by " + e.by + (e.text ? ": " + e.text : "");
    case "detached": return "left for a worker by " + e.by;
    case "child_started": return e.child + " (" + e.agent + ") by " + e.call_id;
    case "delegated": return "by " + e.parent + " as " + e.agent + ", depth " + e.depth;
    case "error": return (e.step !== undefined ? "step " + e.step + ": " : "") + e.message;
    default: return "";
  }
}

// The blobs an event refers to, by field name.
function blobsOf(e) {
  const out = [];
  for (const [k, v] of Object.entries(e)) {
    if (v && typeof v === "object" && typeof v.digest === "string" && typeof v.bytes === "number") out.push([k, v]);
  }
  return out;
}

const MAX_SHOWN = 256 * 1024;

function openSession(id) {
  show("view-session");
  setText($("session-title"), id);
  clear($("timeline"));
  clear($("session-facts"));
  clear($("session-approvals"));
  $("detail").hidden = true;
  $("plan").hidden = true;
  let stopped = false;
  let lastSeq = 0;
  let abort = null;
  let refreshTimer = null;
  const path = "/api/sessions/" + id;

  const refresh = async () => {
    try {
      const s = await api("GET", path);
      renderFacts(s);
      const statusNode = $("session-status");
      statusNode.className = "status status-" + s.status;
      setText(statusNode, s.status);
      statusNode.setAttribute("data-status", s.status);
      $("btn-pause").disabled = s.status !== "running";
      $("btn-resume").disabled = !(s.status === "paused" || s.status === "created");
      $("btn-cancel").disabled = s.status === "finished" || s.status === "failed";
      await renderSessionApprovals(id, s.pending_approvals || []);
      if (s.has_plan) await renderPlan(path);
    } catch (e) {
      showError(e);
    }
  };
  const soon = () => {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 300);
  };

  const add = (record, fresh) => {
    lastSeq = record.seq;
    const row = el("li", { "data-seq": String(record.seq), "data-type": record.type, class: "k-" + record.type },
      el("span", { class: "seq", text: "#" + record.seq }),
      el("span", { class: "time" }, el("span", { class: "kind", text: record.type }), el("br"), el("span", { class: "note", text: clock(record.at_ms) })),
      el("span", { class: "text", text: short(describe(record), 600) }));
    if (record.type === "tool_finished" && !record.ok) row.classList.add("failed");
    if (fresh) row.classList.add("fresh");
    row.addEventListener("click", () => {
      for (const r of $("timeline").querySelectorAll(".selected")) r.classList.remove("selected");
      row.classList.add("selected");
      showDetail(id, record);
    });
    $("timeline").append(row);
  };

  // The live stream: fetch (so the token goes in a header), read SSE by
  // hand, and reconnect after the last seq seen with Last-Event-ID.
  const follow = async () => {
    let backoff = 500;
    let first = true;
    while (!stopped) {
      abort = new AbortController();
      try {
        const headers = { Authorization: "Bearer " + token() };
        if (lastSeq > 0) headers["Last-Event-ID"] = String(lastSeq);
        const res = await fetch(path + "/events/stream", { headers, signal: abort.signal, cache: "no-store" });
        if (res.status === 401) return showLogin("The token was refused; paste the current one.");
        if (!res.ok) throw new ApiError(res.status, "http_" + res.status, "cannot follow the session");
        $("session-live").hidden = false;
        backoff = 500;
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let event = "message", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) event = line.slice(6).trim();
              else if (line.startsWith("data:")) data += (data ? "\n" : "") + line.slice(5).replace(/^ /, "");
            }
            if (event === "message" && data) {
              const record = JSON.parse(data);
              if (record.seq > lastSeq) {
                add(record, !first);
                soon();
              }
            } else if (event === "end") {
              $("session-live").hidden = true;
              soon();
              return;
            }
          }
          first = false;
        }
      } catch (e) {
        if (stopped) return;
      }
      $("session-live").hidden = true;
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 10000);
    }
  };

  const control = (what, body) => async () => {
    try {
      await api("POST", path + "/" + what, body ? body() : {});
      soon();
    } catch (e) {
      showError(e);
    }
  };
  $("btn-pause").onclick = control("pause");
  $("btn-resume").onclick = control("resume");
  $("btn-cancel").onclick = control("cancel");
  $("send-form").onsubmit = (ev) => {
    ev.preventDefault();
    const text = $("send-text").value;
    if (!text.trim()) return;
    control("send", () => ({ text }))().then(() => { $("send-text").value = ""; });
  };
  $("detail-close").onclick = () => { $("detail").hidden = true; };

  refresh();
  follow();
  current = {
    view: "session",
    stop: () => {
      stopped = true;
      clearTimeout(refreshTimer);
      if (abort) abort.abort();
    },
  };
}

function renderFacts(s) {
  const dl = $("session-facts");
  clear(dl);
  const fact = (k, v) => {
    if (v === null || v === undefined || v === "") return;
    dl.append(el("dt", { text: k }), el("dd", { text: String(v) }));
  };
  fact("agent", s.agent);
  fact("goal", s.goal);
  fact("step", s.spend.steps);
  fact("tool calls", s.spend.tool_calls);
  fact("tokens", s.spend.input_tokens + " in / " + s.spend.output_tokens + " out");
  fact("cost", cost(s.spend));
  fact("parent", s.parent);
  if (s.pause) fact("paused", s.pause.kind + ": " + s.pause.detail);
  fact("summary", s.summary);
  fact("error", s.error);
  const kids = Object.values(s.children || {});
  if (kids.length) {
    const dd = el("dd");
    kids.forEach((c, i) => { if (i) dd.append(", "); dd.append(el("a", { href: "#/s/" + c, text: c, class: "mono" })); });
    dl.append(el("dt", { text: "children" }), dd);
  }
  fact("updated", when(s.updated_ms));
}

async function renderSessionApprovals(id, pending) {
  const box = $("session-approvals");
  if (!pending.length) {
    clear(box);
    return;
  }
  const all = await api("GET", "/api/approvals");
  clear(box);
  for (const a of all.approvals.filter((a) => a.session === id)) box.append(approvalCard(a, () => {}));
}

async function renderPlan(path) {
  const plan = await api("GET", path + "/plan");
  const tree = $("plan-tree");
  clear(tree);
  $("plan").hidden = !plan.tasks.length;
  const byId = new Map(plan.tasks.map((t) => [t.id, t]));
  // Each task under the first task it depends on; roots have none.
  const children = new Map();
  const roots = [];
  for (const t of plan.tasks) {
    const parent = (t.depends_on || []).find((d) => byId.has(d));
    if (parent) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(t);
    } else roots.push(t);
  }
  const node = (t, depth) => {
    const li = el("li", { "data-task": t.id },
      el("span", { class: "task-status status-" + statusClass(t.status), text: t.status }),
      el("strong", { text: t.id }), " ", t.title,
      t.attempts ? el("span", { class: "note", text: " (" + t.attempts + " attempts)" }) : null,
      t.depends_on && t.depends_on.length > 1 ? el("span", { class: "note", text: " after " + t.depends_on.join(", ") }) : null);
    const sub = el("ul");
    for (const c of t.checks || []) {
      const mark = c.passed === true ? ["pass", "check-pass"] : c.passed === false ? ["fail", "check-fail"] : ["-", "check-none"];
      sub.append(el("li", {}, el("span", { class: mark[1], text: "[" + mark[0] + "] " }), c.kind + ": " + c.label));
    }
    if (depth < 32) for (const c of children.get(t.id) || []) sub.append(node(c, depth + 1));
    if (sub.childNodes.length) li.append(sub);
    return li;
  };
  for (const t of roots) tree.append(node(t, 0));
}

function statusClass(s) {
  return { done: "finished", running: "running", failed: "failed", blocked: "paused" }[s] || "created";
}

function showDetail(sessionId, record) {
  $("detail").hidden = false;
  setText($("detail-title"), "#" + record.seq + " " + record.type);
  const body = $("detail-body");
  clear(body);
  const plain = Object.assign({}, record);
  body.append(el("pre", { class: "event-json", text: JSON.stringify(plain, null, 2) }));
  for (const [field, blob] of blobsOf(record)) {
    const out = el("pre", { class: "blob", "data-field": field });
    const button = el("button", { type: "button", text: "Show " + field + " (" + blob.bytes + " bytes)" });
    const load = async () => {
      try {
        const bytes = await api("GET", "/api/sessions/" + sessionId + "/blobs/" + encodeURIComponent(blob.digest));
        const view = new Uint8Array(bytes).slice(0, MAX_SHOWN);
        let text = new TextDecoder().decode(view);
        try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* not JSON: as is */ }
        setText(out, text + (bytes.byteLength > MAX_SHOWN ? "\n… (" + bytes.byteLength + " bytes in all)" : ""));
        button.remove();
      } catch (e) {
        showError(e);
      }
    };
    button.addEventListener("click", load);
    body.append(el("h3", { text: field }), button, out);
    // Small ones right away: the step's request, response, input, result.
    if (blob.bytes <= 16 * 1024) load();
  }
}

// ---- approvals -----------------------------------------------------------

function approvalCard(a, after) {
  const reason = el("input", { type: "text", placeholder: "why (to deny)", class: "deny-reason" });
  const answer = (what) => async () => {
    const body = what === "approve" ? { resume: true } : { reason: reason.value, resume: true };
    if (what === "deny" && !reason.value.trim()) {
      reason.focus();
      return showError({ code: "reason", message: "say why: the model is told" });
    }
    try {
      const r = await api("POST", "/api/sessions/" + a.session + "/approvals/" + encodeURIComponent(a.request) + "/" + what, body);
      card.remove();
      if (r.resume_error) showError(r.resume_error);
      refreshApprovalCount();
      after();
    } catch (e) {
      showError(e);
    }
  };
  const input = JSON.stringify(a.input, null, 2);
  // Say so before the buttons, not only in the marks: the person is about
  // to approve text that a plain rendering would have shown differently.
  const hidden = ((String(a.tool) + input).match(HIDDEN) || []).length;
  const card = el("div", { class: "approval", "data-session": a.session, "data-request": a.request },
    el("div", { class: "head" },
      el("strong", { text: a.tool }), el("span", { class: "status", text: a.effect }),
      el("a", { href: "#/s/" + a.session, class: "mono", text: a.session }),
      el("span", { class: "note mono", text: a.request + " · step " + a.step + " · " + a.call_id })),
    hidden ? el("div", { class: "hidden-warning", text: hidden + " character(s) below are invisible or reorder text; each is shown as ⟨U+…⟩ where it stands. Read the arguments as marked." }) : null,
    el("pre", { text: input }),
    el("div", { class: "actions" },
      el("button", { type: "button", class: "approve", text: "Approve once", onclick: answer("approve") }),
      reason,
      el("button", { type: "button", class: "deny danger", text: "Deny", onclick: answer("deny") })));
  return card;
}

function openApprovals() {
  show("view-approvals");
  const load = async () => {
    const list = await refreshApprovalCount();
    const box = $("approvals");
    // Keep a card someone is typing a reason into.
    if (box.contains(document.activeElement)) return;
    clear(box);
    for (const a of list) box.append(approvalCard(a, load));
    $("approvals-empty").hidden = list.length > 0;
  };
  load();
  const timer = setInterval(load, 3000);
  current = { view: "approvals", stop: () => clearInterval(timer) };
}

// ---- memory --------------------------------------------------------------

function openMemory() {
  show("view-memory");
  const search = async () => {
    const q = new URLSearchParams({ limit: "100" });
    if ($("memory-q").value.trim()) q.set("q", $("memory-q").value.trim());
    if ($("memory-scope").value.trim()) q.set("scope", $("memory-scope").value.trim());
    try {
      const found = await api("GET", "/api/memory?" + q);
      const list = $("memories");
      clear(list);
      for (const m of found.memories) {
        list.append(el("li", { "data-id": m.id },
          el("div", { class: "head" }, el("strong", { class: "mono", text: m.id }), " ",
            el("span", { class: "status", text: m.scope }), " ",
            el("span", { class: "note", text: (m.tags || []).join(", ") + " · " + when(m.updated_ms) + " · used " + m.uses + "×" })),
          el("pre", { text: m.text }),
          m.source ? el("div", { class: "note" }, "from ", el("a", { href: "#/s/" + m.source.session, text: m.source.session, class: "mono" }), " event " + m.source.seq) : null));
      }
      $("memories-empty").hidden = found.memories.length > 0;
    } catch (e) {
      showError(e);
    }
  };
  $("memory-form").onsubmit = (ev) => { ev.preventDefault(); search(); };
  search();
  current = { view: "memory", stop: () => {} };
}

// ---- start ---------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  takeTokenFromUrl();
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token-input").value.trim();
    if (!t) return;
    localStorage.setItem(TOKEN_KEY, t);
    $("token-input").value = "";
    route();
  });
  $("forget-token").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    route();
  });
  window.addEventListener("hashchange", () => {
    takeTokenFromUrl();
    route();
  });
  route();
});
