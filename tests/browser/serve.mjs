// The web page of `longhand serve`, in Debian's Chromium driven by
// Playwright. Run by host/tests/all/serve.rs, which starts the server with
// a session paused at its first approval and passes:
//   LONGHAND_URL      http://127.0.0.1:PORT
//   LONGHAND_TOKEN    the server's token
//   LONGHAND_SESSION  the session
//   LONGHAND_REQUEST  its pending request (approved here over the API, to
//                     make an event arrive while the page watches)
//   CHROMIUM          the browser binary (default /usr/bin/chromium)
//   PROFILE_DIR       a fresh --user-data-dir
// Exits 0 when every step held, 1 with the reason otherwise.
import { chromium } from "playwright-core";

const url = process.env.LONGHAND_URL;
const token = process.env.LONGHAND_TOKEN;
const session = process.env.LONGHAND_SESSION;
const firstRequest = process.env.LONGHAND_REQUEST;
const STEP = 60_000; // a step's limit: generous for a debug build on two cores
// Set SCREENSHOTS=DIR to keep what the page looked like (for a person).
const shots = process.env.SCREENSHOTS;
const shoot = async (page, name) => {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
};

function check(cond, what) {
  if (!cond) throw new Error("failed: " + what);
  console.log("ok: " + what);
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
  // A CSP violation or a script error is a failure of the page.
  page.on("console", (m) => {
    if (m.type() === "error" && !/401|Failed to load resource/.test(m.text())) problems.push("console: " + m.text());
  });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));

  // The token comes in the URL's fragment, is kept, and leaves the address bar.
  await page.goto(url + "/#token=" + token);
  const row = page.locator(`#sessions tbody tr[data-id="${session}"]`);
  await row.waitFor();
  check(!page.url().includes(token), "the token left the address bar");
  check(await page.evaluate(() => localStorage.getItem("longhand.token")) === token, "the token is kept");
  check((await row.getAttribute("data-status")) === "paused", "the list shows the session paused");
  check((await row.locator("td").nth(1).textContent()) === "approving", "the list shows its agent");
  check(/^\$\d/.test(await row.locator("td").nth(6).textContent()), "the list shows its spend");

  // Hostile model text is shown as text, never run: the script's first
  // answer says `<img src=x onerror=…>`.
  await row.click();
  // The raw events, one click away under the turns.
  await page.locator("#raw-events summary").click();
  await page.locator('#timeline li[data-type="approval_requested"]').waitFor();
  await page.locator('#session-status[data-status="paused"]').waitFor();
  check(true, "the session view says paused");
  const help = page.locator('#pause-help[data-kind="approval"]');
  await help.waitFor();
  check((await help.textContent()).includes("then approve or deny it"), "the pause says what to do on the page");
  check(await help.locator("button").count() === 1, "with a button");
  // The turn shows the waiting call, its arguments, without a click.
  await page.locator('#turns .call[data-outcome="waiting"] .args').filter({ hasText: "dm.hs" }).waitFor();
  check(true, "the waiting call's arguments are shown in its turn");
  check(await page.locator("#session-live").isVisible(), "the timeline is live");
  const firstCard = page.locator(`#session-approvals .approval[data-request="${firstRequest}"]`);
  await firstCard.waitFor();
  check(await page.locator("#session-approvals .approval").count() === 1, "its pending approval is shown");
  // Its path is `/w/notes<U+202E>dm.hs`, which drawn plainly reads
  // `/w/notes"sh.md`: the card shows the override as a mark, in the order
  // the characters really are, and says so above the arguments.
  const cardText = await firstCard.innerText();
  check(cardText.includes("notes\u27e8U+202E\u27e9dm.hs"), "the card shows the bidi override as ⟨U+202E⟩ where it stands: " + JSON.stringify(cardText));
  check(!/[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d]/.test(cardText), "no bidi or invisible character reaches the card's text");
  check(await firstCard.locator(".hidden-char").count() === 1, "the mark is set apart");
  check(await firstCard.locator(".hidden-warning").isVisible(), "the card warns before its buttons");
  // The timeline's event detail shows it the same way.
  await page.locator('#timeline li[data-type="tool_started"], #timeline li[data-type="approval_requested"]').first().click();
  await page.locator("#detail-body pre.blob").filter({ hasText: "U+202E" }).first().waitFor();
  check(true, "the step's input in the detail view shows the mark too");

  // The step's detail: the model's response, from its blob.
  await page.locator('#timeline li[data-type="model_responded"]').first().click();
  const response = page.locator('#detail-body pre.blob[data-field="response"]');
  await response.filter({ hasText: "fs__write" }).waitFor();
  check((await response.textContent()).includes("<img src=x onerror="), "the response is shown as text");

  // An event arrives while the page watches: the first request is
  // approved over the API, the server's worker runs the write and stops
  // at the second.
  const rows = page.locator("#timeline li");
  const before = await rows.count();
  const approved = await fetch(`${url}/api/sessions/${session}/approvals/${firstRequest}/approve`, {
    method: "POST",
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: JSON.stringify({ resume: true }),
  });
  check(approved.status === 200, "the API approved the first call");
  await page.locator('#timeline li[data-type="approval_granted"]').waitFor();
  await page.locator('#timeline li[data-type="tool_finished"]').waitFor();
  await page.locator('#timeline li[data-type="approval_requested"]').nth(1).waitFor();
  check((await rows.count()) > before, "new events arrived live, without a reload");

  // Approve the second from the page; the session goes on to its end.
  // (Its card, not the answered first one the view may still show.)
  const approve = page.locator(
    `#session-approvals .approval:not([data-request="${firstRequest}"]) button.approve`,
  );
  await approve.waitFor();
  await approve.click();
  await page.locator('#timeline li[data-type="finished"]').waitFor();
  await page.locator('#session-status[data-status="finished"]').waitFor();
  check(true, "approved from the page, the session finished");
  await page.locator('#timeline li[data-type="tool_finished"]').first().click();
  await page.locator('#detail-body pre.blob[data-field="result"]').filter({ hasText: /\S/ }).waitFor();
  await shoot(page, "session");
  const seqs = await rows.evaluateAll((els) => els.map((e) => Number(e.getAttribute("data-seq"))));
  check(seqs.every((s, i) => s === i + 1), "the timeline has every event once, in order");

  // The approvals inbox is empty now; the memory browser answers.
  await page.goto(url + "/#/approvals");
  await page.locator("#approvals-empty").waitFor({ state: "visible" });
  check(true, "the approvals inbox is empty");
  await page.goto(url + "/#/memory");
  await page.locator("#memories-empty").waitFor({ state: "visible" });
  check(true, "the memory browser answers");

  // A phone: the list fits the screen's width.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(url + "/#/sessions");
  await row.waitFor();
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  check(width <= 390, `the list fits a phone's width (${width}px)`);
  await shoot(page, "phone-list");

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
