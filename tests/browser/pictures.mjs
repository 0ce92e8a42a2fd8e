// Issue 19: the session view a person would rather look at, in Debian's
// Chromium driven by Playwright. Run by host/tests/all/serve.rs, which
// runs two sessions to their end and starts `longhand serve --no-worker
// --agents DIR`, and passes:
//   LONGHAND_URL       http://127.0.0.1:PORT
//   LONGHAND_TOKEN     the server's token
//   LONGHAND_PLANNED   a finished planned session (four tasks, five
//                      dependencies, a failed attempt, a judge)
//   LONGHAND_HOSTILE   a finished session whose model wrote markup, a
//                      terminal escape and a bidi override, and whose call
//                      carried 1 MiB of arguments
//   LONGHAND_AGENT     the hostile session's agent, under --agents
//   LONGHAND_OUTSIDER  an agent outside --agents
//   LONGHAND_LIMITED   a session paused at its step limit (1)
//   CHROMIUM, PROFILE_DIR, SCREENSHOTS as for serve.mjs
// Exits 0 when every step held, 1 with the reason otherwise.
import { chromium } from "playwright-core";

const url = process.env.LONGHAND_URL;
const token = process.env.LONGHAND_TOKEN;
const planned = process.env.LONGHAND_PLANNED;
const hostile = process.env.LONGHAND_HOSTILE;
const agentPath = process.env.LONGHAND_AGENT;
const outsider = process.env.LONGHAND_OUTSIDER;
const STEP = 60_000;
const shots = process.env.SCREENSHOTS;
const shoot = async (page, name) => {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
};

function check(cond, what) {
  if (!cond) throw new Error("failed: " + what);
  console.log("ok: " + what);
}

async function apiGet(path) {
  const res = await fetch(url + path, { headers: { Authorization: "Bearer " + token } });
  if (!res.ok) throw new Error(path + ": " + res.status);
  return res.json();
}

async function events(session) {
  return (await apiGet(`/api/sessions/${session}/events?limit=1000`)).events;
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
    if (m.type() === "error" && !/401|403|Failed to load resource/.test(m.text())) problems.push("console: " + m.text());
  });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  await page.goto(url + "/#token=" + token);
  await page.locator("#sessions tbody tr").first().waitFor();

  // ---- the planned session, on a laptop ----
  const log = await events(planned);
  const count = (type) => log.filter((e) => e.type === type).length;
  await page.goto(url + "/#/s/" + planned);
  await page.locator('#session-status[data-status="finished"]').waitFor();
  await page.locator("#turns .turn .said").filter({ hasText: "one done" }).waitFor();
  check(await page.locator("#turns .said", { hasText: "Writing one." }).isVisible(), "the model's words are visible without a click");
  const args = page.locator('#turns .call[data-call="w1"] .args');
  await args.filter({ hasText: "/w/one.txt" }).waitFor();
  check(await args.isVisible(), "a tool's arguments are visible without a click: " + (await args.textContent()));
  const w1 = page.locator('#turns .call[data-call="w1"]');
  check((await w1.getAttribute("data-outcome")) === "ok", "the call's outcome is ok");
  check(/ok, [\d.]+ (ms|s), fuel [\d,]+/.test(await w1.locator(".outcome").textContent()), "the outcome says the receipt's time and fuel: " + (await w1.locator(".outcome").textContent()));
  check((await w1.locator(".tool").textContent()) === "fs/write", "the call names its tool");
  const failed = page.locator("#turns .line.bad", { hasText: "check two #0 (tool) failed" });
  check(await failed.isVisible(), "a failed check is a readable line of its own");
  check(await page.locator("#turns .line", { hasText: "task two done after 2 attempts" }).isVisible(), "a task's end is a line");
  check(await page.locator("#turns .line", { hasText: "the judge is asked about four" }).isVisible(), "the judge's turn is a line");
  // The raw event is one click away.
  await w1.locator("button.raw").first().click();
  await page.locator("#detail-body pre.event-json").filter({ hasText: '"call_id": "w1"' }).waitFor();
  check(await page.locator("#detail").isVisible(), "the raw event opens with one click");

  // The waterfall: one bar per model call and per tool call.
  const models = count("model_requested"), tools = count("tool_started");
  await page.locator("#waterfall g.bar").nth(models + tools - 1).waitFor();
  check(await page.locator('#waterfall g.bar[data-kind="model"]').count() === models, `the waterfall has ${models} model bars`);
  check(await page.locator('#waterfall g.bar[data-kind="tool"]').count() === tools, `the waterfall has ${tools} tool bars`);
  await page.locator('#waterfall g.bar[data-kind="tool"]').first().hover();
  check(/fs\/write w1: [\d.]+ (ms|s), fuel/.test(await page.locator("#wf-info").textContent()), "hovering a bar shows its numbers: " + (await page.locator("#wf-info").textContent()));

  // Tokens over the session, summed, with the numbers in the legend.
  const input = log.filter((e) => e.type === "model_responded").reduce((n, e) => n + e.input_tokens, 0);
  check(await page.locator('#tokens path[data-series="input"]').count() === 1, "the token chart draws the input tokens");
  check(await page.locator('#tokens path[data-series="output"]').count() === 1, "and the output tokens");
  check(await page.locator("#tokens circle.dot").count() === count("model_responded"), "one point per answer");
  const legend = await page.locator("#tokens .legend").textContent();
  check(legend.includes("input " + input.toLocaleString("en")), "the legend says the input tokens spent: " + legend);
  check(/input limit 2,000,000 \(\d+\.\d% used\)/.test(legend), "the input limit is named with how much is used: " + legend);

  // The plan as a graph.
  const plan = await apiGet(`/api/sessions/${planned}/plan`);
  const deps = plan.tasks.reduce((n, t) => n + t.depends_on.length, 0);
  await page.locator("#plan-graph g.task").first().waitFor();
  check(await page.locator("#plan-graph g.task").count() === plan.tasks.length, `the plan graph has one box per task (${plan.tasks.length})`);
  check(await page.locator("#plan-graph path.edge").count() === deps, `and one arrow per dependency (${deps})`);
  check(await page.locator('#plan-graph path.edge[data-from="one"][data-to="three"]').count() === 1, "an arrow goes from a dependency to its task");
  const graph = await page.locator("#plan-graph").textContent();
  check(graph.includes("done (1 attempt)") && graph.includes("done (2 attempts)"), "attempts are counted in words: " + graph);
  check(!/\b(tool: tool|judge: judge)\b/.test(graph), "no doubled check kind: " + graph);
  check(graph.includes("\u2713 tool: ") && graph.includes("\u2713 judge: "), "each box shows its checks passed");
  check(await page.locator('#plan-graph g.task[data-task="four"][data-status="done"]').count() === 1, "boxes carry their status");
  // Disabled controls look disabled; Send is off on a finished session.
  check(await page.locator("#btn-cancel").isDisabled(), "Cancel is off on a finished session");
  check(await page.locator("#send-button").isDisabled() && await page.locator("#send-text").isDisabled(), "the message box and Send are off");
  const opacity = await page.locator("#btn-cancel").evaluate((b) => getComputedStyle(b).opacity);
  check(Number(opacity) < 0.7, "a disabled button looks disabled (opacity " + opacity + ")");
  const icon = await fetch(url + "/favicon.svg");
  check(icon.status === 200 && (icon.headers.get("content-type") || "").startsWith("image/svg+xml"), "the favicon is served");
  check(await page.locator('link[rel="icon"]').count() === 1, "the page names its favicon");
  await shoot(page, "planned");

  // ---- the same on a phone ----
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.locator("#plan-graph g.task").first().waitFor();
  await page.locator("#waterfall g.bar").first().waitFor();
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  // What sticks out, should it: the deepest elements past the edge.
  const wide = width <= 390 ? [] : await page.evaluate(() => [...document.querySelectorAll("body *")]
    .filter((e) => e.getBoundingClientRect().right > 390 && ![...e.children].some((c) => c.getBoundingClientRect().right > 390))
    .slice(0, 5).map((e) => e.tagName + "#" + e.id + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)));
  check(width <= 390, `the session view fits a phone's width (${width}px) ${wide.join(", ")}`);
  const chart = await page.locator("#waterfall svg").boundingBox();
  check(chart && chart.width <= 390, "the waterfall scales down");
  await page.locator('#turns .call[data-call="w1"] .args').waitFor();
  check(await page.locator('#turns .call[data-call="w1"] .args').isVisible(), "arguments are visible on a phone too");
  await shoot(page, "planned-phone");
  if (shots) await page.screenshot({ path: `${shots}/planned-phone-top.png` });
  await page.setViewportSize({ width: 1280, height: 900 });

  // ---- hostile text stays text, and bounded ----
  await page.goto(url + "/#/s/" + hostile);
  const said = page.locator("#turns .said").first();
  await said.filter({ hasText: "Reading" }).waitFor();
  const saidText = await said.textContent();
  check(saidText.includes("<img src=x onerror=window.__pwned=1>"), "markup in the model's words is shown as text");
  check(saidText.includes("\u27e8U+001B\u27e9[31m"), "a terminal escape is shown as ⟨U+001B⟩: " + JSON.stringify(saidText));
  check(saidText.includes("\u27e8U+202E\u27e9desrever"), "a bidi override is shown as ⟨U+202E⟩");
  check(!/[\u001b\u202e]/.test(saidText), "neither character reaches the page's text");
  check(!saidText.includes("line five"), "only the first lines are shown");
  await page.locator("#turns button.more").first().click();
  check((await said.textContent()).includes("line five"), "more shows the rest");
  const bigArgs = page.locator('#turns .call[data-call="big"] .args');
  await bigArgs.filter({ hasText: "/w/big.txt" }).waitFor();
  const bigText = await bigArgs.textContent();
  check(bigText.length < 400 && bigText.includes("…") && /\([\d,]+ bytes\)/.test(bigText), `1 MiB of arguments is cut with a marker (${bigText.length} characters): ${bigText}`);
  check(await page.locator("#turns img, #turns script, #turns b").count() === 0, "no element came from model text");
  const pageText = await page.evaluate(() => document.body.textContent.length);
  check(pageText < 200_000, `the page stays small (${pageText} characters of text)`);
  await shoot(page, "hostile");

  // ---- the list: a goal column, filters in the address ----
  await page.goto(url + "/#/sessions");
  const row = page.locator(`#sessions tbody tr[data-id="${hostile}"]`);
  await row.waitFor();
  check((await row.locator("td.goal").textContent()) === "Follow the script.", "the list has a goal column");
  await page.selectOption("#status-filter", "finished");
  await page.waitForFunction(() => location.hash.includes("status=finished"));
  await page.reload();
  await row.waitFor();
  check(await page.locator("#status-filter").inputValue() === "finished", "the filter is kept in the address");

  // Children under their parent, whatever order the page of the list
  // came in (newest first puts a child above its parent).
  const order = await page.evaluate(() => treeOrder([
    { id: "s-4", parent: "s-1" }, { id: "s-3" }, { id: "s-2", parent: "s-1" }, { id: "s-1" }, { id: "s-0", parent: "s-9" },
  ]).map(([s, d]) => s.id + ":" + d).join(" "));
  check(order === "s-3:0 s-1:0 s-4:1 s-2:1 s-0:1", "children are listed under their parent: " + order);

  // ---- a new session from the page ----
  await page.goto(url + "/#/sessions");
  await page.locator("#new-session").click();
  await page.locator(`#new-agent option[value="${agentPath}"]`).waitFor({ state: "attached" });
  await page.selectOption("#new-agent", agentPath);
  check(await page.locator("#new-goal").inputValue() === "Follow the script.", "the goal defaults to the agent's");
  await page.locator("#new-path").fill(outsider);
  await page.locator("#new-start").click();
  await page.locator("#new-error").waitFor({ state: "visible" });
  const refusal = await page.locator("#new-error").textContent();
  check(refusal.includes("agent_not_allowed") && refusal.includes("not under a directory"), "an agent outside --agents is refused with the server's words: " + refusal);
  await page.locator("#new-path").fill("");
  await page.locator("#new-priority").fill("3");
  await page.locator("#new-start").click();
  await page.waitForFunction((old) => /^#\/s\/s-/.test(location.hash) && !location.hash.endsWith(old), hostile);
  const started = /#\/s\/(s-[0-9A-Za-z]+)/.exec(page.url())[1];
  await page.locator("#session-title").filter({ hasText: started }).waitFor();
  const s = await apiGet("/api/sessions/" + started);
  check(s.agent === "hostile" && s.goal === "Follow the script.", "New session started the chosen agent and opened it");
  // The form and the list fit a phone too.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(url + "/#/sessions");
  await page.locator("#sessions tbody tr").first().waitFor();
  await page.locator("#new-session").click();
  await page.locator(`#new-agent option[value="${agentPath}"]`).waitFor({ state: "attached" });
  const formWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  check(formWidth <= 390, `the list and the form fit a phone (${formWidth}px)`);
  await shoot(page, "new-session-phone");
  await page.setViewportSize({ width: 1280, height: 900 });

  // ---- a pause says what to do, with the button that does it ----
  await page.goto(url + "/#/s/" + process.env.LONGHAND_LIMITED);
  const help = page.locator('#pause-help[data-kind="limit"]');
  await help.waitFor();
  const helpText = await help.textContent();
  check(helpText.includes("The limit max_steps is reached (1). Raise it to go on"), "a limit's pause says what to do on the page: " + helpText);
  check(await page.locator("#raise-value").inputValue() === "2", "and offers twice the limit");
  check(!(await page.locator("#btn-resume").isDisabled()) && !(await page.locator("#send-button").isDisabled()), "Resume and Send are on while it is paused");
  await help.locator('button[type="submit"]').click();
  await page.locator('#session-status:not([data-status="paused"])').waitFor();
  check(await help.isHidden(), "raised and resumed from the page");

  check(await page.evaluate(() => window.__pwned === undefined), "no model text ran as code");
  check(problems.length === 0, "no script error or CSP violation: " + problems.join("; "));
  console.log("browser test passed");
} catch (e) {
  console.error(String(e && e.stack || e));
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await context.close();
}
