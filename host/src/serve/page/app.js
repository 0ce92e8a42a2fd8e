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

/** The Authorization header, when a token is kept. */
function authHeaders() {
  return token() ? { Authorization: "Bearer " + token() } : {};
}

async function api(method, path, body) {
  const headers = authHeaders();
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
  const box = $("toast");
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

// What "?" and "+" in a cost mean, for its tooltip.
const NO_PRICE = "no price is known for this session's model, so what its answers cost is not counted. To count it, give the model an entry in prices.toml on the server ($LONGHAND_HOME/prices.toml: [provider.\"model\"] with input and output in USD per million tokens, 0 for a model you run yourself); a resume reads it. A model served on the server's own loopback (127.0.0.1, ::1, localhost) is priced 0 without one.";
function costTitle(spend) {
  if (!spend.answers_without_price) return "what the answers cost, by the prices frozen when the session started";
  return (spend.cost_micros ? "at least: " + plural(spend.answers_without_price, "answer") + " not counted, " : "") + NO_PRICE;
}

// A cut text's attributes: the text, and its whole as a tooltip when cut.
function cutText(text, n) {
  text = String(text === undefined || text === null ? "" : text);
  return text.length > n ? { text: short(text, n), title: plain(text) } : { text };
}

function statusBadge(status, title) {
  return el("span", Object.assign({ class: "status status-" + status, text: status }, title ? { title } : {}));
}

function short(text, n) {
  text = String(text === undefined || text === null ? "" : text);
  return text.length > n ? text.slice(0, n) + "…" : text;
}

// A pause for a money limit over a model that has no price (the loop
// says "has no price"): raising the limit does not lift it.
function unpricedPause(p) {
  return !!p && p.kind === "limit" && p.limit === "max_cost_micros" && /has no price/.test(p.detail || "");
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
  // No token kept: ask anyway. A server started with --no-auth answers; one
  // that wants a token says 401, and the API call shows the login.
  const hash = location.hash || "#/sessions";
  let m;
  if ((m = /^#\/s\/(s-[0-9A-Za-z]+)$/.exec(hash))) return openSession(m[1]);
  if (hash === "#/approvals") return openApprovals();
  if (hash === "#/memory") return openMemory();
  const q = hash.indexOf("?");
  return openSessions(new URLSearchParams(q >= 0 ? hash.slice(q + 1) : ""));
}

// ---- the session list -------------------------------------------------------

// The filters live in the address (#/sessions?status=paused&agent=x), so a
// reload, a bookmark or a link keeps them.
function openSessions(params) {
  show("view-sessions");
  $("status-filter").value = params.get("status") || "";
  $("agent-filter").value = params.get("agent") || "";
  let cursor = null;
  let timer = null;
  let loaded = [];
  const load = async (more) => {
    const q = new URLSearchParams({ limit: "50" });
    if ($("status-filter").value) q.set("status", $("status-filter").value);
    if ($("agent-filter").value.trim()) q.set("agent", $("agent-filter").value.trim());
    if (more && cursor) q.set("cursor", cursor);
    try {
      const page = await api("GET", "/api/sessions?" + q);
      loaded = more ? loaded.concat(page.sessions) : page.sessions;
      const body = $("sessions").tBodies[0];
      clear(body);
      for (const [s, depth] of treeOrder(loaded)) body.append(sessionRow(s, depth));
      cursor = page.next;
      $("sessions-more").hidden = !page.next;
      $("sessions-empty").hidden = body.rows.length > 0;
    } catch (e) {
      showError(e);
    }
  };
  // A filter changed: into the address (without a new history entry for
  // each keystroke), then the list.
  const filtered = () => {
    const q = new URLSearchParams();
    if ($("status-filter").value) q.set("status", $("status-filter").value);
    if ($("agent-filter").value.trim()) q.set("agent", $("agent-filter").value.trim());
    const hash = "#/sessions" + (q.toString() ? "?" + q : "");
    if (location.hash !== hash) history.replaceState(null, "", location.pathname + hash);
    load(false);
  };
  $("status-filter").onchange = filtered;
  $("agent-filter").onchange = filtered;
  $("sessions-more").onclick = () => load(true);
  $("new-session").onclick = () => openNewSession();
  load(false);
  refreshApprovalCount();
  // The first page is kept fresh while it is shown.
  timer = setInterval(() => { if (!cursor || $("sessions-more").hidden) load(false); refreshApprovalCount(); }, 5000);
  current = { view: "sessions", stop: () => { clearInterval(timer); $("new-form").hidden = true; } };
}

// The sessions with each child right under its parent (depth first, newest
// first among siblings); a child whose parent is not on the page stays
// where it is, marked as a child.
function treeOrder(sessions) {
  const ids = new Set(sessions.map((s) => s.id));
  const kids = new Map();
  for (const s of sessions) {
    if (s.parent && ids.has(s.parent)) {
      if (!kids.has(s.parent)) kids.set(s.parent, []);
      kids.get(s.parent).push(s);
    }
  }
  const out = [];
  const walk = (s, depth) => {
    out.push([s, depth]);
    if (depth < 16) for (const k of kids.get(s.id) || []) walk(k, depth + 1);
  };
  for (const s of sessions) if (!(s.parent && ids.has(s.parent))) walk(s, s.parent ? 1 : 0);
  return out;
}

function sessionRow(s, depth) {
  const open = () => { location.hash = "#/s/" + s.id; };
  const row = el("tr", { "data-id": s.id, "data-status": s.status, "data-depth": String(depth || 0), onclick: open },
    el("td", { "data-label": "Session", class: "mono" }, depth ? el("span", { class: "indent", text: "\u00a0\u00a0".repeat(Math.min(depth, 4) - 1) + "\u2514 " }) : null, el("a", { href: "#/s/" + s.id, text: s.id })),
    el("td", { "data-label": "Agent", text: s.agent }),
    el("td", Object.assign({ "data-label": "Goal", class: "goal" }, cutText(s.goal || "", 120))),
    el("td", { "data-label": "Status" }, s.cancelled ? statusBadge("cancelled", "cancelled by its operator (the store keeps it as failed: the status filter finds it under failed)") : statusBadge(s.status)),
    el("td", { "data-label": "Step", text: String(s.spend.steps) }),
    el("td", { "data-label": "Tokens", text: s.spend.input_tokens.toLocaleString("en") + " / " + s.spend.output_tokens.toLocaleString("en") }),
    el("td", { "data-label": "Cost", class: "cost", text: cost(s.spend), title: costTitle(s.spend) }),
    el("td", { "data-label": "Updated", text: when(s.updated_ms) }));
  if (s.parent) row.classList.add("child");
  return row;
}

// ---- a new session ----------------------------------------------------------

// The form: an agent the server may start (GET /api/agents), or a path
// typed in; a goal, the agent's own unless changed; a priority. The
// server decides: a refusal is shown as it says it.
async function openNewSession() {
  const form = $("new-form");
  form.hidden = false;
  const select = $("new-agent");
  const goal = $("new-goal");
  const say = $("new-error");
  say.hidden = true;
  $("new-path").value = "";
  $("new-priority").value = "0";
  clear(select);
  let agents = [];
  try {
    agents = (await api("GET", "/api/agents")).agents;
  } catch (e) {
    showError(e);
  }
  for (const a of agents) {
    const label = (a.name || "?") + " \u2014 " + a.path + (a.problem ? " (does not load)" : "");
    select.append(el("option", { value: a.path, text: label }));
  }
  $("new-none").hidden = agents.length > 0;
  // The agent the form starts: the typed path when there is one, else the
  // chosen one. Its goal fills the box until a person edits it; a goal
  // shown for one agent is never sent for another.
  const target = () => $("new-path").value.trim() || select.value;
  // A path as typed names a listed agent also with a trailing `/` or as
  // its agent.toml.
  const bare = (p) => p.replace(/\/agent\.toml$/, "").replace(/\/+$/, "");
  const agentAt = (p) => agents.find((x) => bare(x.path) === bare(p));
  let edited = false;
  let writtenFor = null;
  const fill = () => {
    const a = agentAt(target());
    if (!edited) goal.value = (a && a.goal) || "";
    setText($("new-problem"), (a && a.problem) || "");
    // A goal a person wrote is kept, but never moved to another agent
    // without saying so.
    const moved = edited && writtenFor !== null && bare(writtenFor) !== bare(target());
    setText($("new-goal-note"), moved ? "This goal was written while " + (writtenFor || "no agent") + " was chosen; Start sends it to " + (target() || "no agent") + ". Clear it to use that agent's own goal." : "");
  };
  select.onchange = fill;
  $("new-path").oninput = fill;
  goal.oninput = () => {
    edited = goal.value.trim() !== "";
    writtenFor = edited ? target() : null;
    fill();
  };
  goal.value = "";
  fill();
  $("new-cancel").onclick = () => { form.hidden = true; };
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    say.hidden = true;
    const path = target();
    if (!path) {
      setText(say, "choose an agent, or type its path on the server");
      say.hidden = false;
      return;
    }
    const body = { agent: path, priority: Number($("new-priority").value) || 0 };
    const a = agentAt(path);
    // Only a goal a person wrote is sent; the agent's own is left to the
    // server (the agent file's), whichever agent that is.
    if (edited && goal.value.trim() && !(a && goal.value === a.goal)) body.goal = goal.value;
    try {
      const r = await api("POST", "/api/sessions", body);
      form.hidden = true;
      $("new-path").value = "";
      location.hash = "#/s/" + r.session;
    } catch (e) {
      setText(say, (e.code ? e.code + ": " : "") + e.message);
      say.hidden = false;
    }
  };
  select.focus();
}

// The approvals, their arguments as bounded previews (`max` characters),
// at most `limit` of them: polled every few seconds, so never whole. The
// badge asks for the count alone (`limit=0`).
const APPROVAL_CHARS = 2000;
const APPROVALS_SHOWN = 20;
async function refreshApprovalCount(list) {
  try {
    const a = await api("GET", "/api/approvals?max=" + APPROVAL_CHARS + "&limit=" + (list ? APPROVALS_SHOWN : 0));
    setText($("approval-count"), a.total ? String(a.total) : "");
    return a;
  } catch (e) {
    return { approvals: [], total: 0 };
  }
}

// Cards in `box` for `list`, keyed by session and request: a card already
// shown is kept as it is (its whole argument opened, a reason being
// typed, its place), one answered elsewhere goes, a new one is added.
function syncApprovalCards(box, list, after) {
  const key = (a) => a.session + " " + a.request;
  const wanted = new Map(list.map((a) => [key(a), a]));
  for (const card of [...box.querySelectorAll(".approval")]) {
    if (!wanted.has(card.getAttribute("data-session") + " " + card.getAttribute("data-request"))) card.remove();
  }
  const have = new Set([...box.querySelectorAll(".approval")].map((c) => c.getAttribute("data-session") + " " + c.getAttribute("data-request")));
  for (const [k, a] of wanted) if (!have.has(k)) box.append(approvalCard(a, after));
}

// ---- one session ---------------------------------------------------------

// What a raw event row says of an event, in one line.
function describe(e) {
  switch (e.type) {
    case "session_created": return "agent " + e.agent_name;
    case "goal_set": return e.goal;
    case "model_requested": return "step " + e.step + " → " + e.provider + "/" + e.model + (e.role && e.role !== "worker" ? " (" + e.role + ")" : "") + (e.attempt > 1 ? ", attempt " + e.attempt : "");
    case "model_responded": return "step " + e.step + " ← " + e.input_tokens + " in / " + e.output_tokens + " out, " + e.latency_ms + " ms, " + e.stop_reason + (e.calls && e.calls.length ? "; calls " + e.calls.join(", ") : "");
    case "model_failed": return "step " + e.step + " attempt " + e.attempt + ": " + e.error;
    case "tool_started": return e.component + "/" + e.tool + " [" + e.effect + "] " + e.call_id;
    case "tool_finished": return (e.ok ? "ok " : "error ") + e.call_id + receiptText(e.receipt);
    case "tool_in_doubt": return e.call_id + ": " + e.reason;
    case "paused": return e.reason.kind + ": " + e.reason.detail;
    case "resumed": return (e.cause && e.cause !== "operator" ? e.cause : "") + (e.note ? " " + e.note : "") + (e.raised && Object.keys(e.raised).length ? " raised " + JSON.stringify(e.raised) : "");
    case "finished": return e.summary || "";
    case "failed": return e.error;
    case "snapshot": return "through #" + e.through_seq;
    case "plan_created": return "by the " + e.author + ": " + plural(((e.plan && e.plan.tasks) || []).length, "task");
    case "plan_revised": return "by the " + e.author + (e.accepted ? ", accepted: " : ", refused: ") + e.reason;
    case "task_started": return e.task + " attempt " + e.attempt + (e.child ? " in " + e.child : "");
    case "role_started": return e.role + (e.task ? " on " + e.task : "") + (e.check !== undefined ? " check " + e.check : "");
    case "check_finished": return e.task + " check " + e.check + " (" + e.kind + ") " + (e.passed ? "passed" : "failed") + ": " + e.detail;
    case "task_finished": return e.task + " " + e.status + " after " + plural(e.attempts, "attempt");
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

function plural(n, word) {
  return n + " " + word + (n === 1 ? "" : "s");
}

function ms(n) {
  if (n === undefined || n === null) return "";
  if (n === 0) return "0 ms";
  return n >= 10000 ? (n / 1000).toFixed(1) + " s" : n >= 100 ? Math.round(n) + " ms" : (+n).toFixed(n < 10 ? 2 : 1) + " ms";
}

function receiptText(r) {
  r = r || {};
  let out = "";
  if (r.wall_us !== undefined) out += ", " + ms(r.wall_us / 1000);
  if (r.fuel_used !== undefined) out += ", fuel " + r.fuel_used.toLocaleString("en");
  return out;
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
// Characters of a call's arguments shown in its line, and of a result.
const ARGS_SHOWN = 240;
const RESULT_SHOWN = 200;
// Lines of the model's words shown before "more".
const WORDS_LINES = 3;

// Previews of blobs (GET …/previews): asked for in batches as events
// arrive, each at most PREVIEW_CHARS characters of text, whatever the
// blob's size; cached for the view's life.
const PREVIEW_CHARS = 4000;

function previewer(path) {
  const cache = new Map();
  const waiting = new Map();
  let timer = null;
  const flush = async () => {
    timer = null;
    const digests = [...waiting.keys()].slice(0, 100);
    if (!digests.length) return;
    const callbacks = digests.map((d) => [d, waiting.get(d)]);
    for (const d of digests) waiting.delete(d);
    if (waiting.size) timer = setTimeout(flush, 0);
    let got = {};
    try {
      got = (await api("GET", path + "/previews?max=" + PREVIEW_CHARS + "&blobs=" + digests.map(encodeURIComponent).join(","))).previews;
    } catch (e) {
      showError(e);
    }
    for (const [d, fns] of callbacks) {
      const p = got[d] || null;
      cache.set(d, p);
      for (const fn of fns) fn(p);
    }
  };
  return (blob, fn) => {
    if (!blob || !blob.digest) return;
    if (cache.has(blob.digest)) return fn(cache.get(blob.digest));
    if (!waiting.has(blob.digest)) waiting.set(blob.digest, []);
    waiting.get(blob.digest).push(fn);
    if (!timer) timer = setTimeout(flush, 30);
  };
}

// A preview as one line of compact JSON (or its text), at most about `n`
// characters, a cut ending in "…". Long strings share what is left after
// the short ones, as the server's previews do: `{"content": <1 MiB>,
// "path": "/w/a"}` keeps its path.
function compact(p, n) {
  if (!p) return "";
  if (p.json === undefined) return short((p.text || "").replace(/\s+/g, " "), n);
  const lengths = [];
  const walk = (v, d) => {
    if (d > 32) return;
    if (typeof v === "string") lengths.push(v.length);
    else if (Array.isArray(v)) v.forEach((x) => walk(x, d + 1));
    else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) { lengths.push(k.length + 6); walk(x, d + 1); }
  };
  walk(p.json, 0);
  lengths.sort((a, b) => a - b);
  let left = n, cap = Infinity;
  for (let i = 0; i < lengths.length; i++) {
    const share = Math.floor(left / (lengths.length - i));
    if (lengths[i] > share) { cap = Math.max(8, share); break; }
    left -= lengths[i];
  }
  const cut = (v, d) => typeof v === "string" ? short(v, cap)
    : Array.isArray(v) ? v.map((x) => cut(x, d + 1))
    : v && typeof v === "object" && d <= 32 ? Object.fromEntries(Object.entries(v).map(([k, x]) => [short(k, cap), cut(x, d + 1)]))
    : v;
  return short(JSON.stringify(cut(p.json, 0)).replace(/\s+/g, " "), n + 40);
}

// A tool error's words: `{"error": {"kind", "message"}}` (or a string, or
// an access denial's resource and reason) as "kind: message", not JSON.
function errorText(p, n) {
  if (!p) return "";
  const v = p.json && typeof p.json === "object" ? p.json : null;
  if (!v) return compact(p, n);
  const e = v.error !== undefined ? v.error : v;
  if (typeof e === "string") return short(e, n);
  if (e && typeof e === "object" && !Array.isArray(e)) {
    // Its code (a tool error's kind, a wire's code or status), then its
    // words, whichever field holds them; what else it carries is in the
    // tooltip and the raw event.
    const code = ["kind", "code", "status", "type"].map((k) => e[k]).find((c) => typeof c === "string" || typeof c === "number");
    const said = ["message", "reason", "detail", "error", "stderr"].map((k) => e[k]).find((w) => typeof w === "string" && w.trim());
    const where = typeof e.resource === "string" ? e.resource + ": " : typeof e.path === "string" ? e.path + ": " : "";
    if (said !== undefined) return short((code !== undefined ? code + ": " : "") + where + said.trim(), n);
    if (code !== undefined) return short(String(code) + (where ? " (" + where.slice(0, -2) + ")" : ""), n);
  }
  return compact(p, n);
}

// SVG, drawn by the page: elements by name, attributes set one by one;
// text goes in as text nodes, hidden characters written as ⟨U+…⟩.
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = plain(v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children) if (c) node.append(c);
  return node;
}

// An SVG label cut to `n` characters; when cut, the whole in its <title>.
function cutLabel(attrs, text, n) {
  text = String(text === undefined || text === null ? "" : text);
  const node = svg("text", Object.assign({ text: short(text, n) }, attrs));
  if (text.length > n) node.append(svg("title", { text }));
  return node;
}

function plain(text) {
  return String(text === undefined || text === null ? "" : text).replace(HIDDEN, (c) => "\u27e8" + codePoint(c) + "\u27e9");
}

// What the session view knows of the log, folded as events arrive: the
// items of the turn list in order (turns and lines), the bars of the
// waterfall and the points of the token chart.
function sessionModel() {
  return {
    start: 0,
    items: [],
    turns: new Map(),      // step -> turn
    calls: new Map(),      // call_id -> call
    requests: new Map(),   // approval request -> call
    modelCalls: [],        // {step, role, attempt, start, end, outcome, label}
    toolCalls: [],         // {call, start, end, outcome, label}
    checkBars: [],         // {task, check, kind, start, end, outcome, label}
    judging: new Map(),    // "task#check" -> when the judge was asked
    lastAt: 0,             // the time of the event before the one folded
    cancelled: null,       // the operator's cancel, once the session failed of it
    spend: [],             // {seq, at, input, cached, output, cost}
    checks: new Map(),     // task -> [{check, kind, passed, detail}]
    children: new Map(),   // task -> child session
  };
}

function openSession(id) {
  show("view-session");
  setText($("session-title"), id);
  for (const n of ["timeline", "turns", "session-facts", "session-approvals", "pause-help", "waterfall", "tokens", "plan-graph", "wf-info", "tk-info"]) clear($(n));
  $("detail").hidden = true;
  $("plan").hidden = true;
  $("charts").hidden = true;
  let stopped = false;
  let lastSeq = 0;
  let abort = null;
  let refreshTimer = null;
  let drawTimer = null;
  let session = null;
  let plan = null;
  const path = "/api/sessions/" + id;
  const preview = previewer(path);
  const m = sessionModel();

  const refresh = async () => {
    try {
      const s = await api("GET", path);
      session = s;
      renderFacts(s);
      const statusNode = $("session-status");
      // A session its operator cancelled ends `failed` in the store; the
      // log says it was a cancel, and so does the page.
      const shown = s.status === "failed" && (m.cancelled || s.cancelled) ? "cancelled" : s.status;
      statusNode.className = "status status-" + shown;
      setText(statusNode, shown);
      statusNode.setAttribute("data-status", shown);
      if (m.cancelled) statusNode.setAttribute("title", "cancelled by " + m.cancelled.by + (m.cancelled.text ? ": " + plain(m.cancelled.text) : ""));
      const ended = s.status === "finished" || s.status === "failed";
      $("btn-pause").disabled = s.status !== "running";
      $("btn-resume").disabled = !(s.status === "paused" || s.status === "created");
      $("btn-cancel").disabled = ended;
      $("send-text").disabled = ended;
      $("send-button").disabled = ended;
      $("send-text").placeholder = ended ? "the session has " + s.status + ": it takes no message" : "message for the model";
      renderPauseHelp(s);
      await renderSessionApprovals(id, s.pending_approvals || []);
      if (s.has_plan) {
        plan = await api("GET", path + "/plan");
      }
      draw();
    } catch (e) {
      showError(e);
    }
  };
  const soon = () => {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 300);
  };
  // Charts and the plan are redrawn at most a few times a second.
  const draw = () => {
    clearTimeout(drawTimer);
    drawTimer = setTimeout(() => {
      drawWaterfall(m);
      drawTokens(m, session);
      if (plan) drawPlan(plan, m);
    }, 60);
  };

  const rawRow = (record, fresh) => {
    const row = el("li", { "data-seq": String(record.seq), "data-type": record.type, class: "k-" + record.type },
      el("span", { class: "seq", text: "#" + record.seq }),
      el("span", { class: "time" }, el("span", { class: "kind", text: record.type }), el("br"), el("span", { class: "note", text: clock(record.at_ms) })),
      el("span", { class: "text", text: short(describe(record), 600) }));
    if (record.type === "tool_finished" && !record.ok) row.classList.add("failed");
    if (fresh) row.classList.add("fresh");
    row.addEventListener("click", () => select(row, record));
    $("timeline").append(row);
  };
  const select = (node, record) => {
    for (const r of document.querySelectorAll("#view-session .selected")) r.classList.remove("selected");
    if (node) node.classList.add("selected");
    showDetail(id, record);
  };
  // The "{}" beside a line: its raw event, one click away.
  const rawButton = (record) => el("button", {
    type: "button", class: "raw quiet", title: "the raw event #" + record.seq, "data-seq": String(record.seq), text: "#" + record.seq,
    onclick: (ev) => { ev.stopPropagation(); select(ev.currentTarget.closest("li"), record); },
  });
  // Time since the session began, not a clock: a planned run's rows would
  // all read the same second.
  const since = (at) => (m.start ? "+" + ms(at - m.start) : "");

  // A line of its own: a check, a handoff, a pause, steering…
  const line = (record, cls, text, into) => {
    const li = el("li", { class: "line " + cls, "data-type": record.type, "data-seq": String(record.seq) },
      el("span", { class: "when note", text: since(record.at_ms) }),
      el("span", { class: "what", text: text }),
      rawButton(record));
    (into || $("turns")).append(li);
    return li;
  };

  const turnFor = (step, record) => {
    let t = m.turns.get(step);
    if (t) return t;
    // A call without its model turn in view (a log that starts later):
    // a turn of its own.
    const li = el("li", { class: "turn", "data-step": String(step) });
    t = { step, li, head: el("div", { class: "head" }), words: el("div", { class: "words" }), calls: el("ul", { class: "calls" }), lines: el("ul", { class: "lines" }) };
    li.append(t.head, t.words, t.calls, t.lines);
    t.head.append(el("strong", { text: "step " + step }), rawButton(record));
    m.turns.set(step, t);
    $("turns").append(li);
    return t;
  };

  const showWords = (t, p) => {
    clear(t.words);
    if (!p) return;
    const r = p.json && typeof p.json === "object" ? p.json : null;
    const text = r ? r.text || "" : p.text || "";
    if (text.trim()) {
      // The server ends a text it cut with "…"; a preview cut elsewhere
      // (a long argument) leaves the words whole.
      const textCut = p.cut && text.endsWith("\u2026");
      const lines = text.split("\n");
      const long = lines.length > WORDS_LINES || textCut;
      const first = lines.slice(0, WORDS_LINES).join("\n") + (lines.length > WORDS_LINES ? "…" : "");
      const box = el("div", { class: "said" });
      box.append(visible(first));
      t.words.append(box);
      if (long) {
        let open = false;
        const more = el("button", { type: "button", class: "more quiet", text: "more" });
        more.addEventListener("click", () => {
          open = !open;
          clear(box);
          box.append(visible(open ? text : first));
          setText(more, open ? "less" : "more");
        });
        t.words.append(more);
        if (textCut) t.words.append(el("span", { class: "note", text: " (" + p.bytes.toLocaleString("en") + " bytes in all: the raw event has it whole)" }));
      }
    }
    // Calls the answer made that never started (refused before running,
    // or the log ends here) are named from the answer itself.
    for (const c of (r && r.tool_calls) || []) {
      const call = callFor(t, c.id, null);
      if (!call.argsShown) setArgs(call, c.arguments);
      if (!call.toolShown) setText(call.tool, c.name);
    }
  };

  const callFor = (t, callId, record) => {
    let c = m.calls.get(callId);
    if (c) return c;
    const li = el("li", { class: "call", "data-call": callId });
    c = { id: callId, li, tool: el("strong", { class: "tool mono" }), effect: el("span", { class: "effect" }), args: el("code", { class: "args" }), outcome: el("span", { class: "outcome" }), lines: el("ul", { class: "lines" }) };
    li.append(el("div", { class: "head" }, c.tool, " ", c.effect, " ", c.outcome, record ? rawButton(record) : null), c.args, c.lines);
    t.calls.append(li);
    m.calls.set(callId, c);
    return c;
  };
  const setArgs = (c, args) => {
    // Arguments arrive as JSON (a call's input) or as the model's string.
    let text = typeof args === "string" ? args : JSON.stringify(args);
    try { if (typeof args === "string") text = JSON.stringify(JSON.parse(args)); } catch (_) { /* as the model wrote it */ }
    setText(c.args, short(text, ARGS_SHOWN));
  };
  const outcome = (c, cls, text) => {
    c.li.classList.remove("ok", "error", "doubt", "denied", "waiting", "cut");
    c.li.classList.add(cls);
    c.li.setAttribute("data-outcome", cls);
    setText(c.outcome, text);
  };

  const add = (record, fresh) => {
    lastSeq = record.seq;
    rawRow(record, fresh);
    if (!m.start) m.start = record.at_ms;
    const e = record;
    switch (e.type) {
      case "model_requested": {
        let t = m.turns.get(e.step);
        if (!t) {
          t = turnFor(e.step, record);
          clear(t.head);
          t.head.append(el("strong", { text: "step " + e.step }), " ",
            el("span", { class: "role", text: e.role && e.role !== "worker" ? e.role : "" }), " ",
            el("span", { class: "model note", text: e.provider + "/" + e.model }), " ",
            t.spend = el("span", { class: "spend note" }), " ",
            el("span", { class: "when note", text: since(e.at_ms) }),
            rawButton(record));
        }
        if (e.attempt > 1) t.lines.append(el("li", { class: "line", text: "attempt " + e.attempt }));
        m.modelCalls.push({ step: e.step, role: e.role || "worker", attempt: e.attempt, start: e.at_ms, end: null, outcome: "running", label: "step " + e.step + (e.role && e.role !== "worker" ? " " + e.role : "") + " " + e.model });
        break;
      }
      case "model_responded": {
        const t = turnFor(e.step, record);
        const mc = [...m.modelCalls].reverse().find((c) => c.step === e.step && c.end === null);
        if (mc) {
          mc.end = e.at_ms; mc.latency = e.latency_ms; mc.outcome = "ok"; mc.tokens = e.input_tokens + " in / " + e.output_tokens + " out";
          // The model's own latency, not the log's clock: the records of a
          // step may be written together.
          if (e.latency_ms > 0) mc.start = Math.min(mc.start, e.at_ms - e.latency_ms);
        }
        if (t.spend) setText(t.spend, e.input_tokens.toLocaleString("en") + " in" + (e.cached_input_tokens ? " (" + e.cached_input_tokens.toLocaleString("en") + " cached)" : "") + " / " + e.output_tokens.toLocaleString("en") + " out · " + ms(e.latency_ms) + (e.stop_reason !== "end_turn" && e.stop_reason !== "tool_use" ? " · " + e.stop_reason : ""));
        t.li.setAttribute("data-seq", String(e.seq));
        const prev = m.spend[m.spend.length - 1] || { input: 0, cached: 0, output: 0, cost: 0 };
        m.spend.push({ seq: e.seq, at: e.at_ms, input: prev.input + e.input_tokens, cached: prev.cached + (e.cached_input_tokens || 0), output: prev.output + e.output_tokens, cost: prev.cost + (e.cost_micros || 0), priced: prev.priced || e.cost_micros !== undefined });
        preview(e.response, (p) => showWords(t, p));
        break;
      }
      case "model_failed": {
        const t = turnFor(e.step, record);
        const mc = [...m.modelCalls].reverse().find((c) => c.step === e.step && c.end === null);
        if (mc) { mc.end = e.at_ms; mc.outcome = "error"; mc.error = e.error; }
        line(record, "bad", "model call failed (attempt " + e.attempt + "): " + short(e.error, 300) + (e.retry_after_ms ? ", retry after " + ms(e.retry_after_ms) : ""), t.lines);
        break;
      }
      case "tool_started": {
        const t = turnFor(e.step, record);
        const c = callFor(t, e.call_id, record);
        setText(c.tool, e.component + "/" + e.tool);
        c.toolShown = true;
        setText(c.effect, e.effect);
        c.effect.className = "effect effect-" + e.effect;
        outcome(c, "waiting", "running");
        c.bar = { call: e.call_id, start: e.at_ms, end: null, outcome: "running", label: e.component + "/" + e.tool };
        m.toolCalls.push(c.bar);
        c.argsShown = true;
        preview(e.input, (p) => setText(c.args, compact(p, ARGS_SHOWN) + (p && p.cut ? " (" + p.bytes.toLocaleString("en") + " bytes)" : "")));
        break;
      }
      case "tool_finished": {
        const c = m.calls.get(e.call_id) || callFor(turnFor(e.step, record), e.call_id, record);
        const r = e.receipt || {};
        if (c.bar) {
          c.bar.end = e.at_ms; c.bar.wall_us = r.wall_us; c.bar.fuel = r.fuel_used; c.bar.outcome = e.ok ? "ok" : "error";
          // The bar is the receipt's wall time, ending where the call's end
          // was recorded: a call's start and end may be written together,
          // so the log's clock can make a 509 ms call 0 ms long.
          if (typeof r.wall_us === "number") c.bar.start = e.at_ms - r.wall_us / 1000;
        }
        if (e.ok) outcome(c, "ok", "ok" + receiptText(r));
        else {
          outcome(c, "error", "error" + receiptText(r));
          const why = el("span", { class: "error-text" });
          c.outcome.append(": ", why);
          preview(e.result, (p) => {
            setText(why, errorText(p, RESULT_SHOWN));
            if (p && p.json !== undefined) why.setAttribute("title", plain(short(JSON.stringify(p.json), 2000)));
          });
        }
        c.li.append(rawButton(record));
        break;
      }
      case "tool_in_doubt": {
        const c = m.calls.get(e.call_id);
        // A call cut by a pause keeps the end the pause gave it: the time
        // the session stood still is not the call's.
        if (c) { outcome(c, "doubt", "in doubt: " + e.reason); if (c.bar) { if (c.bar.end === null) c.bar.end = e.at_ms; c.bar.outcome = "doubt"; } }
        else line(record, "warn", "call " + e.call_id + " in doubt: " + e.reason);
        break;
      }
      case "approval_requested": {
        const t = turnFor(e.step, record);
        const c = callFor(t, e.call_id, record);
        setText(c.tool, e.tool);
        c.toolShown = true;
        setText(c.effect, e.effect);
        c.effect.className = "effect effect-" + e.effect;
        if (!c.argsShown) { c.argsShown = true; preview(e.input, (p) => setText(c.args, compact(p, ARGS_SHOWN))); }
        outcome(c, "waiting", "waiting for approval");
        m.requests.set(e.request, c);
        line(record, "warn", "approval asked (" + e.request + ")", c.lines);
        break;
      }
      case "approval_granted": {
        const c = m.requests.get(e.request);
        if (c && c.li.getAttribute("data-outcome") === "waiting" && !c.bar) outcome(c, "waiting", "approved");
        line(record, "good", "approved by " + e.by + " (" + e.scope + ")", c ? c.lines : null);
        break;
      }
      case "approval_denied": {
        const c = m.requests.get(e.request);
        if (c) outcome(c, "denied", "denied: " + short(e.reason, 200));
        line(record, "bad", "denied by " + e.by + ": " + e.reason, c ? c.lines : null);
        break;
      }
      case "check_finished": {
        if (!m.checks.has(e.task)) m.checks.set(e.task, []);
        m.checks.get(e.task)[e.check] = e;
        // A check is a bar too: a judge's from when it was asked, a
        // harness check's from the event before it (it runs right after),
        // a command's by its own wall time when its output says it.
        const key = e.task + "#" + e.check;
        const bar = { task: e.task, check: e.check, kind: e.kind, start: e.kind === "judge" && m.judging.has(key) ? m.judging.get(key) : (m.lastAt || e.at_ms), end: e.at_ms, outcome: e.passed ? "ok" : "error", label: "check " + e.task + " #" + e.check + " " + e.kind };
        m.checkBars.push(bar);
        if (e.kind === "command" && e.output) preview(e.output, (p) => {
          const w = p && p.json && typeof p.json.wall_ms === "number" ? p.json.wall_ms : null;
          if (w !== null) { bar.start = e.at_ms - w; bar.wall_ms = w; draw(); }
        });
        line(record, e.passed ? "good" : "bad", "check " + e.task + " #" + e.check + " (" + e.kind + ") " + (e.passed ? "passed" : "failed") + ": " + short(e.detail, 300));
        break;
      }
      case "task_started":
        if (e.child) m.children.set(e.task, e.child);
        line(record, "task", "task " + e.task + ": attempt " + e.attempt + " starts in a fresh context" + (e.child ? " in " + e.child : ""));
        break;
      case "task_finished": line(record, e.status === "done" ? "good" : "bad", "task " + e.task + " " + e.status + " after " + plural(e.attempts, "attempt")); break;
      case "role_started":
        if (e.role === "judge" && e.task !== undefined && e.check !== undefined) m.judging.set(e.task + "#" + e.check, e.at_ms);
        line(record, "task", "the " + e.role + " is asked" + (e.task ? " about " + e.task : "") + (e.check !== undefined ? ", check #" + e.check : "")); break;
      case "paused":
        cutOpen(e, "stopped by the pause (" + e.reason.kind + ") before it ended: its outcome is not known yet");
        line(record, "warn", "paused (" + e.reason.kind + "): " + e.reason.detail);
        break;
      case "resumed": line(record, "good", "resumed" + (describe(e) ? ": " + describe(e).trim() : "")); break;
      case "steered":
        if (e.kind === "cancel" || e.kind === "cancel_now") m.cancelAsked = e;
        line(record, "warn", e.kind + " by " + e.by + (e.text ? ": " + short(e.text, 300) : "")); break;
      case "handoff": line(record, "task", "context handed off" + (e.task ? " in " + e.task : "") + " at " + e.context_tokens.toLocaleString("en") + " tokens, by the " + (e.by_model ? "model" : "harness")); break;
      case "child_started": {
        const c = m.calls.get(e.call_id);
        const li = line(record, "task", "started " + e.agent + " as ", c ? c.lines : null);
        li.querySelector(".what").append(el("a", { href: "#/s/" + e.child, class: "mono", text: e.child }));
        break;
      }
      case "snapshot": case "detached": case "calls_learned": break;
      case "failed": case "finished": {
        if (e.type === "failed" && m.cancelAsked) m.cancelled = m.cancelAsked;
        cutOpen(e, m.cancelled ? "cut by the cancel: its outcome is not known" : "the session ended before it did: its outcome is not known");
        const text = describe(e);
        line(record, e.type === "finished" ? "good" : m.cancelled ? "cancelled" : "bad", (m.cancelled ? "cancelled" : e.type) + (text ? ": " + short(text, 600) : ""));
        break;
      }
      default: {
        const text = describe(e);
        line(record, e.type === "failed" || e.type === "error" ? "bad" : e.type === "finished" ? "good" : "", e.type.replace(/_/g, " ") + (text ? ": " + short(text, 600) : ""));
      }
    }
    m.lastAt = record.at_ms;
    draw();
  };

  // Calls and model requests still open when the session stopped (a pause,
  // a cancel, the end) are not running: they end there, outcome unknown,
  // until the log says more (a resumed call's finish, or in doubt).
  const cutOpen = (e, why) => {
    for (const b of m.modelCalls) if (b.end === null) { b.end = e.at_ms; b.outcome = "cut"; b.error = why; }
    for (const c of m.calls.values()) {
      if (!c.bar || c.bar.end !== null) continue;
      c.bar.end = e.at_ms;
      c.bar.outcome = "cut";
      outcome(c, "cut", why);
    }
  };

  // The live stream: fetch (so the token goes in a header), read SSE by
  // hand, and reconnect after the last seq seen with Last-Event-ID.
  const follow = async () => {
    let backoff = 500;
    let first = true;
    while (!stopped) {
      abort = new AbortController();
      try {
        const headers = authHeaders();
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
  // Resume on a limit's pause without raising it would pause again at
  // once, saying nothing: say which limit, and offer the raise instead.
  // The server refuses a resume that would pause again at once
  // (409 limit_still_reached): its words go above the raise, where the
  // person acts, not in a toast.
  const resumeNote = (text) => {
    const box = $("pause-help");
    let note = $("resume-note");
    if (!note) {
      note = el("p", { id: "resume-note", class: "refusal", role: "alert" });
      box.prepend(note);
    }
    setText(note, text);
    const input = $("raise-value");
    if (input) input.focus();
  };
  const resume = (body) => async () => {
    try {
      await api("POST", path + "/resume", body || {});
      soon();
    } catch (e) {
      if (e.code === "limit_still_reached" && !$("pause-help").hidden) resumeNote(e.message);
      else showError(e);
    }
  };
  $("btn-resume").onclick = () => {
    const p = session && session.status === "paused" ? session.pause : null;
    if (p && p.kind === "limit" && p.limit && !unpricedPause(p)) {
      resumeNote("Resuming as it is would stop again at once: the limit " + p.limit + " is still reached. Raise it below and resume.");
      return;
    }
    resume()();
  };
  // Cancel ends the session for good: asked first.
  // A session nobody runs (paused, or created) reads its inbox only when
  // it runs again: the page resumes it after the cancel, so that the
  // cancel ends it now instead of waiting in the inbox while the page
  // says nothing.
  $("btn-cancel").onclick = async () => {
    if (!window.confirm("Cancel " + id + "? It ends for good (as cancelled): a cancelled session cannot be resumed.")) return;
    const idle = session && (session.status === "paused" || session.status === "created");
    try {
      await api("POST", path + "/cancel", {});
      if (idle) await api("POST", path + "/resume", {});
      soon();
    } catch (e) {
      showError(e);
    }
  };
  $("send-form").onsubmit = (ev) => {
    ev.preventDefault();
    const text = $("send-text").value;
    if (!text.trim()) return;
    control("send", () => ({ text }))().then(() => { $("send-text").value = ""; });
  };
  $("detail-close").onclick = () => { $("detail").hidden = true; };
  // What to do about a pause, with the buttons that do it.
  const renderPauseHelp = (s) => {
    const box = $("pause-help");
    clear(box);
    box.hidden = !(s.status === "paused" && s.pause);
    if (box.hidden) return;
    const p = s.pause;
    const say = (t) => box.append(el("p", { text: t }));
    box.setAttribute("data-kind", p.kind);
    say("Paused: " + p.detail);
    if (p.kind === "approval") {
      say("A tool call waits for you: read its arguments below, then approve or deny it.");
      box.append(el("button", { type: "button", text: "Show the request", onclick: () => $("session-approvals").scrollIntoView() }));
    } else if (unpricedPause(p)) {
      // Raising the money limit does not help: the model's answers cannot
      // be counted against any limit until it has a price.
      say("Raising " + p.limit + " would not help: the model has no price, so its spend cannot be counted against any money limit. Either give it a price in prices.toml on the server (a resume reads it), then resume; or go on without a money limit.");
      box.append(el("div", { class: "controls" },
        el("button", { type: "button", id: "resume-priced", text: "Resume (priced now)", onclick: resume() }),
        el("button", { type: "button", id: "resume-unlimited", class: "danger", text: "Resume without a money limit", onclick: () => {
          if (window.confirm("Go on with no money limit? Its spend will not be counted.")) resume({ raise: { [p.limit]: 0 } })();
        } })));
    } else if (p.kind === "limit" && p.limit) {
      const now = s.limits && s.limits[p.limit];
      say("The limit " + p.limit + " is reached" + (now !== undefined ? " (" + now.toLocaleString("en") + ")" : "") + ". Raise it to go on (the CLI: longhand resume " + id + " --raise " + p.limit + "=N):");
      const input = el("input", { type: "number", min: "1", id: "raise-value", value: String(now ? now * 2 : 1) });
      box.append(el("form", { class: "inline", id: "raise-form", onsubmit: (ev) => {
        ev.preventDefault();
        const value = Number(input.value);
        resume({ raise: { [p.limit]: value } })();
      } }, el("label", { text: p.limit + " " }, input), el("button", { type: "submit", text: "Raise and resume" })));
    } else {
      say(p.kind === "plan" ? "Resume to give the failed tasks new attempts." : "Resume to let it go on.");
      box.append(el("button", { type: "button", text: "Resume", onclick: resume() }));
    }
  };

  const resized = () => draw();
  window.addEventListener("resize", resized);
  refresh();
  follow();
  current = {
    view: "session",
    stop: () => {
      window.removeEventListener("resize", resized);
      stopped = true;
      clearTimeout(refreshTimer);
      clearTimeout(drawTimer);
      if (abort) abort.abort();
    },
  };
}

// `text`'s first `lines` lines, and a "more" that shows the rest.
function expandable(text, lines) {
  const all = text.split("\n");
  const out = document.createDocumentFragment();
  if (all.length <= lines) {
    out.append(visible(text));
    return out;
  }
  const first = all.slice(0, lines).join("\n") + "…";
  const box = el("span", { class: "expandable" }, first);
  let open = false;
  const more = el("button", { type: "button", class: "more quiet", text: "more" });
  more.addEventListener("click", () => {
    open = !open;
    setText(box, open ? text : first);
    setText(more, open ? "less" : "more");
  });
  out.append(box, " ", more);
  return out;
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
  fact("tokens", s.spend.input_tokens.toLocaleString("en") + " in / " + s.spend.output_tokens.toLocaleString("en") + " out");
  if (s.spend) dl.append(el("dt", { text: "cost" }), el("dd", { class: "cost", title: costTitle(s.spend), text: cost(s.spend) + (s.spend.answers_without_price ? " (no price known: hover for why)" : "") }));
  if (s.parent) dl.append(el("dt", { text: "parent" }), el("dd", {}, el("a", { href: "#/s/" + s.parent, class: "mono", text: s.parent })));
  for (const [k, v] of [["summary", s.summary], ["error", s.error]]) {
    if (v) dl.append(el("dt", { text: k }), el("dd", {}, expandable(String(v), 3)));
  }
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
  const mine = await api("GET", "/api/approvals?max=" + APPROVAL_CHARS + "&limit=" + APPROVALS_SHOWN + "&session=" + encodeURIComponent(id));
  syncApprovalCards(box, mine.approvals, () => {});
}

// ---- the pictures ----------------------------------------------------------

// The numbers of the bar or point a person points at or taps, under its chart.
function info(node, text) {
  clear(node);
  node.append(visible(text));
}

// The width a chart's box gives it (600 while it is not laid out).
function drawWidth(box) {
  const w = box.clientWidth - 10;
  return w > 0 ? Math.max(280, Math.min(1000, w)) : 600;
}

// The waterfall: one bar per model call and per tool call, on one time
// axis from the first to the last of them.
function drawWaterfall(m) {
  const bars = [
    ...m.modelCalls.map((c) => ({ kind: "model", start: c.start, end: c.end, outcome: c.outcome, label: c.label, text: c.label + ": " + (c.outcome === "cut" ? "cut off after " + ms(c.end - c.start) + ", no answer" : c.end !== null ? ms(c.latency !== undefined ? c.latency : c.end - c.start) : "running") + (c.tokens ? ", " + c.tokens + " tokens" : "") + (c.error ? ", " + c.error : "") })),
    ...m.toolCalls.map((c) => ({ kind: "tool", start: c.start, end: c.end, outcome: c.outcome, label: c.label, text: c.label + " " + c.call + ": " + (c.outcome === "cut" ? "cut off after " + ms(c.end - c.start) + ", outcome unknown" : c.end !== null ? ms(c.wall_us !== undefined ? c.wall_us / 1000 : c.end - c.start) + (c.fuel !== undefined ? ", fuel " + c.fuel.toLocaleString("en") : "") + ", " + c.outcome : "running") })),
    ...m.checkBars.map((c) => ({ kind: "check", start: c.start, end: c.end, outcome: c.outcome, label: c.label, text: c.label + ": " + ms(c.end - c.start) + (c.wall_ms !== undefined ? " (the command's own time)" : "") + ", " + (c.outcome === "ok" ? "passed" : "failed") })),
  ].sort((a, b) => a.start - b.start);
  const box = $("waterfall");
  clear(box);
  $("charts").hidden = bars.length === 0;
  if (!bars.length) return;
  const t0 = bars[0].start;
  const now = Date.now();
  const t1 = Math.max(t0 + 1, ...bars.map((b) => b.end === null ? Math.min(now, b.start + 60000) : b.end));
  // Drawn at the width it is shown at, so its words stay readable on a
  // phone; redrawn when the window changes.
  const W = drawWidth(box), row = 14, top = 4, left = Math.min(150, Math.round(W * 0.32)), H = top + bars.length * row + 22;
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (W - left - 8);
  const root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", role: "img", "aria-label": "durations of " + bars.length + " calls" });
  bars.forEach((b, i) => {
    const y = top + i * row;
    const end = b.end === null ? t1 : b.end;
    const w = Math.max(2, x(end) - x(b.start));
    const g = svg("g", { class: "bar " + b.kind + " " + b.outcome, "data-kind": b.kind, tabindex: "0" },
      svg("title", { text: b.text }),
      // The whole row answers a pointer or a tap, not only a thin bar.
      svg("rect", { x: 0, y, width: W, height: row, class: "hit" }),
      cutLabel({ x: left - 6, y: y + row - 4, "text-anchor": "end", class: "label" }, b.label, Math.floor(left / 6.5)),
      svg("rect", { x: x(b.start).toFixed(1), y: y + 2, width: w.toFixed(1), height: row - 4, rx: 2, class: "span" }));
    const tell = () => info($("wf-info"), b.text);
    g.addEventListener("pointerenter", tell);
    g.addEventListener("click", tell);
    g.addEventListener("focus", tell);
    root.append(g);
  });
  const axisY = top + bars.length * row + 4;
  root.append(svg("line", { x1: left, x2: W - 8, y1: axisY, y2: axisY, class: "axis" }),
    svg("text", { x: left, y: axisY + 14, class: "label", text: "0" }),
    svg("text", { x: W - 8, y: axisY + 14, "text-anchor": "end", class: "label", text: ms(t1 - t0) }));
  box.append(root);
}

// Tokens (and cost, where priced) summed over the session's answers, with
// the limits as dashed lines; a limit far above the curve is named, not
// drawn, so the curve keeps its shape.
function drawTokens(m, s) {
  const box = $("tokens");
  clear(box);
  const pts = m.spend;
  if (!pts.length) return;
  const limits = (s && s.limits) || {};
  const last = pts[pts.length - 1];
  const series = [["input", "input"], ["cached", "cached input"], ["output", "output"]];
  let top = Math.max(1, last.input, last.output);
  const lines = [];
  for (const [key, name, field] of [["input", "input", "max_input_tokens"], ["output", "output", "max_output_tokens"]]) {
    const lim = limits[field];
    if (!lim) continue;
    if (lim <= top * 4) { top = Math.max(top, lim); lines.push([key, name + " limit " + lim.toLocaleString("en"), lim]); }
    else lines.push([key, name + " limit " + lim.toLocaleString("en") + " (" + (100 * last[key] / lim).toFixed(1) + "% used)", null]);
  }
  const W = drawWidth(box), H = 170, L = 56, R = 10, T = 10, B = 24;
  const x = (i) => L + (pts.length === 1 ? (W - L - R) : (i / (pts.length - 1)) * (W - L - R));
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", role: "img", "aria-label": "tokens over the session" });
  root.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }),
    svg("text", { x: L - 4, y: T + 8, "text-anchor": "end", class: "label", text: top.toLocaleString("en") }),
    svg("text", { x: L - 4, y: H - B, "text-anchor": "end", class: "label", text: "0" }),
    svg("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "label", text: plural(pts.length, "answer") }));
  for (const [key, , at] of lines) {
    if (at === null) continue;
    root.append(svg("line", { x1: L, x2: W - R, y1: y(at), y2: y(at), class: "limit " + key, "data-limit": key }));
  }
  for (const [key] of series) {
    if (key === "cached" && !last.cached) continue;
    const d = pts.map((p, i) => (i ? "L" : "M") + x(i).toFixed(1) + " " + y(p[key]).toFixed(1)).join(" ");
    root.append(svg("path", { d, class: "series " + key, "data-series": key }));
  }
  // Cost on its own scale (right), where the answers were priced.
  if (last.priced && last.cost > 0) {
    const topCost = Math.max(last.cost, limits.max_cost_micros && limits.max_cost_micros <= last.cost * 4 ? limits.max_cost_micros : 0);
    const yc = (v) => T + (1 - v / topCost) * (H - T - B);
    root.append(svg("path", { d: pts.map((p, i) => (i ? "L" : "M") + x(i).toFixed(1) + " " + yc(p.cost).toFixed(1)).join(" "), class: "series cost", "data-series": "cost" }),
      svg("text", { x: W - R, y: T + 8, "text-anchor": "end", class: "label", text: "$" + (topCost / 1e6).toFixed(4) }));
    if (topCost > last.cost) root.append(svg("line", { x1: L, x2: W - R, y1: yc(topCost), y2: yc(topCost), class: "limit cost", "data-limit": "cost" }));
  }
  pts.forEach((p, i) => {
    const text = "answer " + (i + 1) + " (#" + p.seq + "): " + p.input.toLocaleString("en") + " in" + (p.cached ? " (" + p.cached.toLocaleString("en") + " cached)" : "") + ", " + p.output.toLocaleString("en") + " out" + (p.priced ? ", $" + (p.cost / 1e6).toFixed(4) : "") + " so far";
    const dot = svg("circle", { cx: x(i).toFixed(1), cy: y(p.input).toFixed(1), r: 3, class: "dot", tabindex: "0" }, svg("title", { text }));
    const tell = () => info($("tk-info"), text);
    dot.addEventListener("pointerenter", tell);
    dot.addEventListener("click", tell);
    root.append(dot);
  });
  box.append(root);
  const legend = el("p", { class: "legend note" });
  for (const [key, name] of series) if (key !== "cached" || last.cached) legend.append(el("span", { class: "key " + key, text: name + " " + last[key].toLocaleString("en") }), " ");
  if (last.priced) legend.append(el("span", { class: "key cost", text: "cost $" + (last.cost / 1e6).toFixed(4) + (limits.max_cost_micros ? " of $" + (limits.max_cost_micros / 1e6).toFixed(2) : "") }), " ");
  else if (s && s.spend && s.spend.answers_without_price) legend.append(el("span", { class: "key cost no-price", title: NO_PRICE, text: "cost ? (no price known for the model)" }), " ");
  for (const [key, name] of lines) legend.append(el("span", { class: "key limit-" + key, text: name }), " ");
  box.append(legend);
}

// The plan as a graph: a box per task in columns by depth (a task right of
// everything it depends on), an arrow per dependency; each box says its
// status, attempts and checks, and links the child session that ran it.
function drawPlan(plan, m) {
  const box = $("plan-graph");
  clear(box);
  $("plan").hidden = !plan.tasks.length;
  if (!plan.tasks.length) return;
  const byId = new Map(plan.tasks.map((t) => [t.id, t]));
  const depth = new Map();
  const level = (t, seen) => {
    if (depth.has(t.id)) return depth.get(t.id);
    if (seen.has(t.id) || seen.size > 64) return 0;
    seen.add(t.id);
    let d = 0;
    for (const dep of t.depends_on || []) if (byId.has(dep)) d = Math.max(d, level(byId.get(dep), seen) + 1);
    depth.set(t.id, d);
    return d;
  };
  const cols = [];
  for (const t of plan.tasks) {
    const d = level(t, new Set());
    (cols[d] = cols[d] || []).push(t);
  }
  const BW = 190, BH = 78, GX = 44, GY = 14, P = 6;
  // An arrow that skips a column goes over the boxes, in a band on top.
  const skips = plan.tasks.some((t) => (t.depends_on || []).some((d) => depth.has(d) && depth.get(t.id) - depth.get(d) > 1));
  const PT = skips ? 30 : P;
  const pos = new Map();
  cols.forEach((col, c) => col.forEach((t, r) => pos.set(t.id, { x: P + c * (BW + GX), y: PT + r * (BH + GY), col: c })));
  const W = P * 2 + cols.length * BW + (cols.length - 1) * GX;
  const H = PT + P + Math.max(...cols.map((c) => c.length)) * (BH + GY) - GY;
  // Drawn at its own size; on a narrow screen its box scrolls sideways
  // rather than shrinking the words past reading.
  const root = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, class: "chart plan", role: "img", "aria-label": plural(plan.tasks.length, "task") });
  root.append(svg("defs", {}, svg("marker", { id: "arrowhead", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" }, svg("path", { d: "M0 0 L8 4 L0 8 z", class: "arrowhead" }))));
  for (const t of plan.tasks) {
    const to = pos.get(t.id);
    for (const dep of t.depends_on || []) {
      const from = pos.get(dep);
      if (!from) continue;
      let d;
      if (to.col - from.col > 1) {
        const x1 = from.x + BW / 2, y1 = from.y, x2 = to.x + BW / 2 - 12, y2 = to.y, top = 4 + (to.col - from.col) * 3;
        d = "M" + x1 + " " + y1 + " C" + x1 + " " + top + " " + x2 + " " + top + " " + x2 + " " + y2;
      } else {
        const x1 = from.x + BW, y1 = from.y + BH / 2, x2 = to.x, y2 = to.y + BH / 2;
        d = "M" + x1 + " " + y1 + " C" + (x1 + GX / 2) + " " + y1 + " " + (x2 - GX / 2) + " " + y2 + " " + x2 + " " + y2;
      }
      root.append(svg("path", { d, class: "edge", "marker-end": "url(#arrowhead)", "data-from": dep, "data-to": t.id }));
    }
  }
  for (const t of plan.tasks) {
    const { x, y } = pos.get(t.id);
    const checks = (t.checks || []).map((c, i) => {
      const seen = (m.checks.get(t.id) || [])[i];
      const mark = c.passed === true ? "\u2713" : c.passed === false ? "\u2717" : "\u00b7";
      return { mark, cls: c.passed === true ? "pass" : c.passed === false ? "fail" : "none", text: mark + " " + checkLabel(c), detail: seen ? seen.detail : "" };
    });
    const child = m.children.get(t.id);
    const g = svg("g", { class: "task status-" + statusClass(t.status), "data-task": t.id, "data-status": t.status });
    g.append(svg("title", { text: t.id + ": " + t.title + " — " + t.status + ", " + plural(t.attempts || 0, "attempt") + checks.map((c) => "\n" + c.text + (c.detail ? ": " + c.detail : "")).join("") }),
      svg("rect", { x, y, width: BW, height: BH, rx: 6, class: "box" }),
      svg("text", { x: x + 8, y: y + 16, class: "task-id", text: short(t.id, 24) }),
      svg("text", { x: x + BW - 8, y: y + 16, "text-anchor": "end", class: "task-state", text: t.status + (t.attempts ? " (" + plural(t.attempts, "attempt") + ")" : "") }),
      svg("text", { x: x + 8, y: y + 32, class: "task-title", text: short(t.title, 30) }));
    checks.slice(0, 2).forEach((c, i) => g.append(svg("text", { x: x + 8, y: y + 48 + i * 13, class: "check check-" + c.cls, text: short(c.text, 30) })));
    if (checks.length > 2) g.append(svg("text", { x: x + BW - 8, y: y + 74, "text-anchor": "end", class: "label", text: "+" + (checks.length - 2) + " checks" }));
    if (child) {
      const a = svg("a", { href: "#/s/" + child, class: "child-link" }, svg("text", { x: x + 8, y: y + BH - 4, class: "label", text: "\u2192 " + child.slice(0, 12) + "\u2026" }));
      g.append(a);
    }
    root.append(g);
  }
  box.append(root);
}

// A check's label without its kind said twice ("tool: tool fs__stat …").
function checkLabel(c) {
  const label = String(c.label || "");
  const kind = String(c.kind || "");
  const bare = label.startsWith(kind + ": ") ? label.slice(kind.length + 2) : label.startsWith(kind + " ") ? label.slice(kind.length + 1) : label;
  return kind + ": " + bare;
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
  $("detail").scrollIntoView({ block: "nearest" });
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
  // The server sends a bounded preview of the arguments (a 1 MiB argument
  // is not re-sent on every poll); the whole is one click away.
  const input = typeof a.input === "string" ? a.input : JSON.stringify(a.input, null, 2);
  // Say so before the buttons, not only in the marks: the person is about
  // to approve text that a plain rendering would have shown differently.
  // The server counts the whole input, not only what the preview kept.
  const hidden = ((String(a.tool)).match(HIDDEN) || []).length + (a.input_hidden !== undefined ? a.input_hidden : (input.match(HIDDEN) || []).length);
  const args = el("pre", { class: "args", text: input });
  let whole = null;
  if (a.input_cut && a.input_blob) {
    const button = el("button", { type: "button", class: "show-whole", text: "Show all " + a.input_bytes.toLocaleString("en") + " bytes" });
    button.addEventListener("click", async () => {
      try {
        const bytes = await api("GET", "/api/sessions/" + a.session + "/blobs/" + encodeURIComponent(a.input_blob.digest));
        let text = new TextDecoder().decode(new Uint8Array(bytes));
        try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* as it is */ }
        setText(args, text);
        args.classList.add("whole");
        button.remove();
      } catch (e) {
        showError(e);
      }
    });
    whole = el("p", { class: "note cut-note" }, "Cut to a preview: long strings end in … (" + a.input_bytes.toLocaleString("en") + " bytes in all). ", button);
  }
  const card = el("div", { class: "approval", "data-session": a.session, "data-request": a.request },
    el("div", { class: "head" },
      el("strong", { text: a.tool }), el("span", { class: "status", text: a.effect }),
      el("span", { class: "agent", text: a.agent ? "agent " + a.agent : "" }),
      el("a", { href: "#/s/" + a.session, class: "mono", text: a.session }),
      el("span", { class: "note mono", text: a.request + " · step " + a.step + " · " + a.call_id })),
    a.goal ? el("div", Object.assign({ class: "note approval-goal" }, cutText("goal: " + a.goal, 160))) : null,
    hidden ? el("div", { class: "hidden-warning", text: hidden + " character(s) in the arguments are invisible or reorder text; each is shown as ⟨U+…⟩ where it stands. Read the arguments as marked." }) : null,
    args, whole,
    el("div", { class: "actions" },
      el("button", { type: "button", class: "approve", text: "Approve once", onclick: answer("approve") }),
      reason,
      el("button", { type: "button", class: "deny danger", text: "Deny", onclick: answer("deny") })));
  return card;
}

function openApprovals() {
  show("view-approvals");
  const load = async () => {
    const got = await refreshApprovalCount(true);
    syncApprovalCards($("approvals"), got.approvals, load);
    $("approvals-empty").hidden = got.total > 0;
    const more = got.total - got.approvals.length;
    setText($("approvals-more"), more > 0 ? plural(more, "more request") + " wait" + (more === 1 ? "s" : "") + ": answer these first, or see each session's own page" : "");
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
