// Issue 31 §3: the page never misleads. Run by host/tests/all/serve.rs
// (the_page_never_misleads_in_chromium), which runs three sessions and
// starts `longhand serve --no-worker --agents DIR`, and passes:
//   LONGHAND_URL, LONGHAND_TOKEN   the server
//   LONGHAND_BIG        paused at an approval of a 1 MiB write
//   LONGHAND_FAILING    finished, its one call failed with a tool error
//   LONGHAND_LIMITED    paused at its step limit (1)
//   LONGHAND_CANCELLED  failed by its operator's cancel
//   LONGHAND_BIG_AGENT, LONGHAND_FAILING_AGENT   their agent directories
//   LONGHAND_BIG_GOAL   the big writer's goal (long: the list cuts it)
//   CHROMIUM, PROFILE_DIR, SCREENSHOTS as for serve.mjs
// Logs no scripted run makes (a 509 ms write whose start and end were
// recorded in the same instant, a command check, a pause over a running
// call, a cancel) are served for made-up session ids by this script, in
// the API's shapes, through Playwright's routing: the page folds them as
// it would the server's.
// Exits 0 when every step held, 1 with the reason otherwise.
import { chromium } from "playwright-core";

const url = process.env.LONGHAND_URL;
const token = process.env.LONGHAND_TOKEN;
const STEP = 60_000;
const shots = process.env.SCREENSHOTS;
const shoot = async (page, name) => {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
};

function check(cond, what) {
  if (!cond) throw new Error("failed: " + what);
  console.log("ok: " + what);
}

// ---- made-up logs, in the API's shapes ----
const T = Date.UTC(2026, 11, 4, 12, 0, 0);
const blob = (d, bytes) => ({ digest: "sha256:" + d.padEnd(64, "0"), bytes: bytes || 10 });
const LONG_COMPONENT = "a-component-with-a-very-long-name";
const logs = {
  // A write of 509 ms whose tool_started and tool_finished were written
  // together; a command check of 400 ms; then a call cut by a pause.
  "s-0mockwaterfall": {
    status: "paused",
    pause: { kind: "user", detail: "paused by ops" },
    events: [
      { type: "session_created", at: 0, agent_name: "mock", agent: {}, config_digest: "sha256:0", calls: [] },
      { type: "goal_set", at: 0, goal: "time things honestly" },
      { type: "model_requested", at: 0, step: 1, provider: "p", model: "m", role: "worker", attempt: 1, request: blob("a1") },
      { type: "model_responded", at: 1000, step: 1, input_tokens: 10, output_tokens: 5, latency_ms: 1000, stop_reason: "tool_use", response: blob("b1"), calls: ["w1"] },
      { type: "tool_started", at: 1600, step: 1, call_id: "w1", component: "fs", component_digest: "sha256:0", tool: "write", effect: "writes", input: blob("c1") },
      { type: "tool_finished", at: 1600, step: 1, call_id: "w1", ok: true, result: blob("d1"), receipt: { wall_us: 509000, fuel_used: 1234 } },
      { type: "check_finished", at: 2100, task: "t", check: 0, kind: "command", passed: true, detail: "exit code 0", output: blob("e1", 80) },
      { type: "model_requested", at: 2100, step: 2, provider: "p", model: "m", role: "worker", attempt: 1, request: blob("a2") },
      { type: "model_responded", at: 2200, step: 2, input_tokens: 10, output_tokens: 5, latency_ms: 100, stop_reason: "tool_use", response: blob("b2"), calls: ["r2"] },
      { type: "tool_started", at: 2300, step: 2, call_id: "r2", component: LONG_COMPONENT, component_digest: "sha256:0", tool: "delegate", effect: "writes", input: blob("c2") },
      { type: "steered", at: 3300, control: 1, kind: "pause", by: "ops" },
      { type: "paused", at: 3300, reason: { kind: "user", detail: "paused by ops" } },
    ],
    previews: { e1: { bytes: 80, cut: false, json: { code: 0, wall_ms: 400, stdout: "", stderr: "" } } },
  },
  // A cancel: steered, then failed with the cancel's words.
  "s-0mockcancelled": {
    status: "failed",
    error: "cancelled by ops: wrong goal",
    events: [
      { type: "session_created", at: 0, agent_name: "mock", agent: {}, config_digest: "sha256:0", calls: [] },
      { type: "goal_set", at: 0, goal: "be cancelled" },
      { type: "model_requested", at: 0, step: 1, provider: "p", model: "m", role: "worker", attempt: 1, request: blob("a3") },
      { type: "steered", at: 500, control: 1, kind: "cancel_now", text: "wrong goal", by: "ops" },
      { type: "failed", at: 600, error: "cancelled now by ops: wrong goal" },
    ],
    previews: {},
  },
  // The second run's variants. A call cut by a pause, then found in
  // doubt a minute later on the resume: its bar keeps the pause's end. A
  // failed call with a receipt, whose error has a code.
  "s-0mockdoubt": {
    status: "running",
    events: [
      { type: "session_created", at: 0, agent_name: "mock", agent: {}, config_digest: "sha256:0", calls: [] },
      { type: "goal_set", at: 0, goal: "doubt" },
      { type: "model_requested", at: 0, step: 1, provider: "p", model: "m", role: "worker", attempt: 1, request: blob("a4") },
      { type: "model_responded", at: 1000, step: 1, input_tokens: 10, output_tokens: 5, latency_ms: 1000, stop_reason: "tool_use", response: blob("b4"), calls: ["x1", "x2"] },
      { type: "tool_started", at: 1000, step: 1, call_id: "x1", component: "fs", component_digest: "sha256:0", tool: "write", effect: "writes", input: blob("c4") },
      { type: "tool_finished", at: 1000, step: 1, call_id: "x1", ok: false, result: blob("d4"), receipt: { wall_us: 250000 } },
      { type: "tool_started", at: 1000, step: 1, call_id: "x2", component: "fs", component_digest: "sha256:0", tool: "write", effect: "writes", input: blob("c5") },
      { type: "paused", at: 2000, reason: { kind: "user", detail: "lunch" } },
      { type: "resumed", at: 62000 },
      { type: "tool_in_doubt", at: 62000, step: 1, call_id: "x2", reason: "the write may or may not have happened" },
    ],
    previews: { d4: { bytes: 60, cut: false, json: { error: { code: 28, message: "no space left on device" } } } },
  },
  // Paused at a money limit over a model that has no price: raising the
  // limit would not lift it.
  "s-0mockunpriced": {
    status: "paused",
    pause: { kind: "limit", limit: "max_cost_micros", detail: "model `m` (provider p) has no price, so max_cost_micros = 1000 cannot be counted; give it a price in prices.toml" },
    events: [
      { type: "session_created", at: 0, agent_name: "mock", agent: {}, config_digest: "sha256:0", calls: [] },
      { type: "goal_set", at: 0, goal: "unpriced" },
      { type: "paused", at: 10, reason: { kind: "limit", limit: "max_cost_micros", detail: "model `m` (provider p) has no price" } },
    ],
    previews: {},
  },
};
for (const log of Object.values(logs)) log.events = log.events.map((e, i) => Object.assign({ seq: i + 1, at_ms: T + e.at }, e, { at: undefined }));

async function mock(page) {
  await page.route(/\/api\/sessions\/s-0mock[a-z]+/, async (route) => {
    const u = new URL(route.request().url());
    const m = /\/api\/sessions\/(s-0mock[a-z]+)(\/.*)?$/.exec(u.pathname);
    const id = m[1], rest = m[2] || "", log = logs[id];
    const json = (v) => route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify(v) });
    if (rest === "") {
      return json({
        id, agent: "mock", status: log.status, created_ms: T, updated_ms: T + 4000, last_seq: log.events.length, parent: null,
        goal: log.events[1].goal, awaiting_worker: false,
        spend: { steps: 2, input_tokens: 20, output_tokens: 10, tool_calls: 2, cost_micros: 0, answers_without_price: 2 },
        pause: log.pause || null, summary: null, summary_blob: null, error: log.error || null, children: {}, pending_approvals: [], has_plan: false, limits: {},
      });
    }
    if (rest === "/events/stream") {
      const after = Number(route.request().headers()["last-event-id"] || u.searchParams.get("after") || 0);
      let body = log.events.filter((e) => e.seq > after).map((e) => "id: " + e.seq + "\ndata: " + JSON.stringify(e) + "\n\n").join("");
      if (log.status === "failed" || log.status === "finished") body += "event: end\ndata: " + log.events.length + "\n\n";
      return route.fulfill({ status: 200, contentType: "text/event-stream", body });
    }
    if (rest === "/previews") {
      const out = {};
      for (const d of (u.searchParams.get("blobs") || "").split(",")) {
        const key = d.replace(/^sha256:/, "").replace(/0+$/, "");
        if (log.previews[key]) out[d] = log.previews[key];
      }
      return json({ previews: out });
    }
    return route.fulfill({ status: 404, contentType: "application/json", body: JSON.stringify({ error: { code: "route_not_found", message: "mock" } }) });
  });
}

const context = await chromium.launchPersistentContext(process.env.PROFILE_DIR, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
  viewport: { width: 1280, height: 900 },
});
const problems = [];
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(STEP);
  page.on("console", (m) => {
    if (m.type() === "error" && !/401|403|404|Failed to load resource/.test(m.text())) problems.push("console: " + m.text());
  });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  await mock(page);
  await page.goto(url + "/#token=" + token);
  await page.locator("#sessions tbody tr").first().waitFor();

  // ---- a failed call stays in its turn, and says its error in words ----
  await page.goto(url + "/#/s/" + process.env.LONGHAND_FAILING);
  const failed = page.locator('#turns .call[data-call="r1"][data-outcome="error"]');
  await failed.waitFor();
  const why = failed.locator(".error-text");
  await page.waitForFunction(() => { const n = document.querySelector('#turns .call[data-call="r1"] .error-text'); return n && n.textContent.length > 0; });
  const whyText = await why.textContent();
  check(!whyText.trim().startsWith("{") && !whyText.includes('"kind"'), "a tool error is said in words, not JSON: " + whyText);
  check(await failed.evaluate((li) => getComputedStyle(li).position) === "static", "a failed call is not pinned over the page");
  const fixed = await page.evaluate(() => [...document.querySelectorAll("body *")].filter((e) => getComputedStyle(e).position === "fixed").map((e) => e.id || e.className));
  check(fixed.length === 1 && fixed[0] === "toast", "only the toast is fixed on the page: " + JSON.stringify(fixed));
  const box = await failed.boundingBox();
  const turns = await page.locator("#turns").boundingBox();
  check(box && turns && box.y >= turns.y && box.y + box.height <= turns.y + turns.height + 1, "the failed call sits inside the turns");
  await shoot(page, "failed-call");

  // ---- the waterfall: receipts' wall time, checks, a call cut by a pause ----
  await page.goto(url + "/#/s/s-0mockwaterfall");
  await page.locator('#session-status[data-status="paused"]').waitFor();
  await page.locator('#waterfall g.bar[data-kind="check"]').waitFor();
  const width = async (sel) => Number(await page.locator(sel + " rect.span").first().getAttribute("width"));
  const model1 = await width('#waterfall g.bar[data-kind="model"]');
  const write = await width('#waterfall g.bar[data-kind="tool"].ok');
  const ratio = write / model1;
  check(ratio > 0.45 && ratio < 0.56, `a 509 ms write recorded in one instant is drawn 509 ms long (${write.toFixed(1)} px against the 1,000 ms model call's ${model1.toFixed(1)})`);
  await page.waitForFunction(() => { const r = document.querySelector('#waterfall g.bar[data-kind="check"] rect.span'); return r && Number(r.getAttribute("width")) > 20; });
  const checkBar = await width('#waterfall g.bar[data-kind="check"]');
  check(checkBar / model1 > 0.35 && checkBar / model1 < 0.45, `a command check is a bar of its own wall time (400 ms: ${checkBar.toFixed(1)} px)`);
  check(await page.locator("#waterfall g.bar.running").count() === 0, "no bar says running in a paused session");
  const cut = page.locator('#turns .call[data-call="r2"]');
  check(await cut.getAttribute("data-outcome") === "cut", "a call open when the session paused is cut, not running");
  const cutText = await cut.locator(".outcome").textContent();
  check(/pause/.test(cutText) && /not known/.test(cutText) && !/running/.test(cutText), "and says its outcome is not known: " + cutText);
  check(await page.locator('#waterfall g.bar.cut[data-kind="tool"]').count() === 1, "its bar is drawn as cut");
  const label = page.locator('#waterfall g.bar[data-kind="tool"].cut text.label');
  check((await label.locator("title").textContent()).includes(LONG_COMPONENT), "a cut label has its whole text as a tooltip");
  const costDd = page.locator("#session-facts dd.cost");
  check((await costDd.textContent()).startsWith("?") && /no price/.test(await costDd.getAttribute("title")), "a ? cost says why: " + (await costDd.getAttribute("title")));
  await shoot(page, "waterfall");

  // ---- a cancel is shown as one ----
  await page.goto(url + "/#/s/s-0mockcancelled");
  await page.locator('#session-status[data-status="cancelled"]').waitFor();
  const badge = page.locator("#session-status");
  check((await badge.textContent()) === "cancelled", "a cancelled session says cancelled, not failed");
  const red = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue("--bad").trim());
  const color = await badge.evaluate((b) => getComputedStyle(b).color);
  check(color !== "rgb(179, 38, 30)" && red === "#b3261e", "and not in the failure's red: " + color);
  // The waterfall is drawn after the badge: wait for it (a busy machine
  // draws it later), then look.
  await page.waitForFunction(() => document.querySelectorAll("#waterfall g.bar").length > 0, null, { timeout: 10000 }).catch(() => {});
  check(await page.locator("#waterfall g.bar.running").count() === 0 && await page.locator("#waterfall g.bar.cut").count() === 1, "the model call the cancel cut is not running");

  // ---- a cut call found in doubt keeps the pause's end; a failed call's
  // bar is its receipt, its error a code and words ----
  await page.goto(url + "/#/s/s-0mockdoubt");
  await page.locator('#turns .call[data-call="x2"][data-outcome="doubt"]').waitFor();
  await page.waitForFunction(() => document.querySelectorAll("#waterfall g.bar").length === 3);
  const m4 = await width('#waterfall g.bar[data-kind="model"]');
  const failedBar = await width('#waterfall g.bar[data-kind="tool"].error');
  check(failedBar / m4 > 0.2 && failedBar / m4 < 0.3, `a failed call is drawn by its receipt too (250 ms: ${failedBar.toFixed(1)} px against ${m4.toFixed(1)})`);
  const doubtBar = await width('#waterfall g.bar[data-kind="tool"].doubt');
  check(doubtBar / m4 > 0.9 && doubtBar / m4 < 1.1, `a call cut by a pause and found in doubt on the resume a minute later ends at the pause (${doubtBar.toFixed(1)} px, not 61 s)`);
  await page.waitForFunction(() => { const n = document.querySelector('#turns .call[data-call="x1"] .error-text'); return n && n.textContent.length > 0; });
  const coded = await page.locator('#turns .call[data-call="x1"] .error-text').textContent();
  check(coded === "28: no space left on device", "a tool error with a code says code and words: " + coded);

  // ---- a money limit over a model with no price: raising it would not help ----
  await page.goto(url + "/#/s/s-0mockunpriced");
  await page.locator('#pause-help[data-kind="limit"]').waitFor();
  check(await page.locator("#raise-value").count() === 0, "no raise offered for a model without a price");
  check(await page.locator("#resume-unlimited").isVisible() && /prices\.toml/.test(await page.locator("#pause-help").textContent()), "it says to price the model, or to go on without a money limit");

  // ---- Cancel asks first ----
  const limited = process.env.LONGHAND_LIMITED;
  await page.goto(url + "/#/s/" + limited);
  await page.locator('#pause-help[data-kind="limit"]').waitFor();
  const posts = [];
  page.on("request", (r) => { if (r.method() === "POST") posts.push(new URL(r.url()).pathname); });
  page.once("dialog", (d) => d.dismiss());
  await page.locator("#btn-cancel").click();
  await page.waitForTimeout(300);
  check(!posts.some((p) => p.endsWith("/cancel")), "Cancel asks first, and a no posts nothing");
  // ---- Resume on a limit's pause says which limit ----
  await page.locator("#btn-resume").click();
  const note = page.locator("#resume-note");
  await note.waitFor();
  check((await note.textContent()).includes("max_steps"), "Resume on a limit's pause names the limit: " + (await note.textContent()));
  check(await page.evaluate(() => document.activeElement && document.activeElement.id) === "raise-value", "and puts the person on the raise");
  await page.waitForTimeout(300);
  check(!posts.some((p) => p.endsWith("/resume")), "nothing was posted to re-pause at once");
  // A raise that does not lift the limit: the server refuses it, and its
  // words stand above the raise.
  await page.locator("#raise-value").fill("1");
  await page.locator('#raise-form button[type="submit"]').click();
  await page.waitForFunction(() => /again at once: max_steps reached \(1 of 1\)/.test((document.getElementById("resume-note") || {}).textContent || ""));
  check(await page.locator("#toast").isHidden(), "a raise too small is refused where the raise is, naming the limit: " + (await note.textContent()));
  await shoot(page, "limit-resume");

  // ---- approvals: bounded, named, the whole on request ----
  const sizes = [];
  page.on("response", async (r) => {
    if (new URL(r.url()).pathname !== "/api/approvals") return;
    try { sizes.push((await r.body()).length); } catch (_) { /* the page moved on */ }
  });
  await page.goto(url + "/#/approvals");
  const card = page.locator(`#approvals .approval[data-session="${process.env.LONGHAND_BIG}"]`);
  await card.waitFor();
  await page.waitForFunction(() => true);
  const bigGoal = process.env.LONGHAND_BIG_GOAL;
  const head = await card.textContent();
  check(head.includes("agent big-writer"), "an approval names its agent");
  check(head.includes("goal: " + bigGoal.slice(0, 40)), "and its goal");
  check(await card.locator(".hidden-warning").isVisible(), "a hidden character past the preview is warned of");
  const cardBox = await card.boundingBox();
  check(cardBox.height < 800, `the card stays small (${Math.round(cardBox.height)} px)`);
  const approveBox = await card.locator("button.approve").boundingBox();
  check(approveBox.y < 900, "its buttons are in view without scrolling");
  check(sizes.length > 0 && Math.max(...sizes) < 8192, "the approvals poll is bounded: " + JSON.stringify(sizes));
  await shoot(page, "approvals");
  await card.locator("button.show-whole").click();
  await page.waitForFunction(() => { const p = document.querySelector("#approvals pre.args.whole"); return p && p.textContent.length > 1048576; });
  const after = await card.boundingBox();
  check(after.height < 1400, `the whole argument is shown in a box that scrolls (card ${Math.round(after.height)} px)`);
  // The poll (every 3 s) keeps a card as it is: the whole stays open.
  await page.waitForTimeout(4000);
  check(await page.evaluate(() => { const p = document.querySelector("#approvals pre.args.whole"); return p ? p.textContent.length : 0; }) > 1048576, "the whole argument stays open across the next polls");
  check(sizes.length > 1 && Math.max(...sizes) < 8192, "and each poll stays bounded: " + JSON.stringify(sizes));

  // ---- the list: a cut goal has its whole as a tooltip ----
  await page.goto(url + "/#/sessions");
  const row = page.locator(`#sessions tbody tr[data-id="${process.env.LONGHAND_BIG}"]`);
  await row.waitFor();
  check((await row.locator("td.goal").getAttribute("title")) === bigGoal, "a cut goal in the list has its whole as a tooltip");
  // A cancelled session says so in the list, not red "failed".
  const gone = page.locator(`#sessions tbody tr[data-id="${process.env.LONGHAND_CANCELLED}"] .status`);
  check((await gone.textContent()) === "cancelled" && !!(await gone.getAttribute("title")), "the list shows a cancelled session as cancelled");

  // ---- New session: the goal follows the agent it will start ----
  await page.locator("#new-session").click();
  const bigAgent = process.env.LONGHAND_BIG_AGENT, failingAgent = process.env.LONGHAND_FAILING_AGENT;
  await page.locator(`#new-agent option[value="${bigAgent}"]`).waitFor({ state: "attached" });
  await page.selectOption("#new-agent", bigAgent);
  check(await page.locator("#new-goal").inputValue() === bigGoal, "the chosen agent's goal is shown");
  await page.locator("#new-path").fill("/somewhere/else");
  check(await page.locator("#new-goal").inputValue() === "", "a typed path the server did not list keeps no other agent's goal");
  await page.locator("#new-path").fill(failingAgent + "/");
  check(await page.locator("#new-goal").inputValue() === "Follow the script.", "a typed path with a trailing / names the listed agent, and shows its goal");
  await page.locator("#new-path").fill(failingAgent + "/agent.toml");
  check(await page.locator("#new-goal").inputValue() === "Follow the script.", "so does its agent.toml");
  // A goal a person wrote is kept, but never moved to another agent
  // without saying so.
  await page.locator("#new-path").fill("");
  await page.selectOption("#new-agent", bigAgent);
  await page.locator("#new-goal").fill("my own goal for the writer");
  check(await page.locator("#new-goal-note").textContent() === "", "no note while the goal is for the agent it was written for");
  await page.locator("#new-path").fill(failingAgent);
  const moved = await page.locator("#new-goal-note").textContent();
  check(moved.includes(bigAgent) && moved.includes(failingAgent), "a written goal moving to another agent is said: " + moved);
  await page.locator("#new-goal").fill("");
  check(await page.locator("#new-goal").inputValue() === "Follow the script." && await page.locator("#new-goal-note").textContent() === "", "cleared, the box takes the typed agent's own goal and the note goes");
  await page.locator("#new-path").fill("");
  await page.locator("#new-path").fill(failingAgent);
  check(await page.locator("#new-goal").inputValue() === "Follow the script.", "a typed path of a listed agent shows that agent's goal");
  await page.locator("#new-start").click();
  await page.waitForFunction(() => /^#\/s\/s-/.test(location.hash) || !document.getElementById("new-error").hidden);
  check(await page.locator("#new-error").isHidden(), "the typed path's agent starts: " + (await page.locator("#new-error").textContent()));
  const started = /#\/s\/(s-[0-9A-Za-z]+)/.exec(page.url())[1];
  await page.locator("#session-title").filter({ hasText: started }).waitFor();

  check(problems.length === 0, "no script error or CSP violation: " + problems.join("; "));
  console.log("browser test passed");
} catch (e) {
  console.error(String(e && e.stack || e));
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await context.close();
}
