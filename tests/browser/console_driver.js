/* tollgate's browser tests: one step of tests/integration/test_console.py,
 * run in Debian's chromium through puppeteer-core (web/package-lock.json
 * pins it; it never downloads a browser). The Python test starts tollgate
 * and the stub, then runs
 *
 *   node console_driver.js STEP CONFIG.json
 *
 * and reads one JSON line of results from stdout. STEP is timeline, desk,
 * deliveries, approve, viewer, report or accounts. Every step starts its own browser with a fresh profile and stops
 * it. Screenshots go to config.shots. */
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

const cfg = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const puppeteer = require(path.join(cfg.web, 'node_modules', 'puppeteer-core'));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function launch() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: cfg.chromium || '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--user-data-dir=' + profile,
    ],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const log = { errors: [], failed: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') log.errors.push(m.text());
  });
  page.on('pageerror', (e) => log.errors.push('pageerror: ' + e.message));
  page.on('response', (r) => {
    if (r.status() >= 400) log.failed.push(r.status() + ' ' + r.url());
  });
  page.on('requestfailed', (r) => log.failed.push('failed ' + r.url()));
  return { browser, page, log, profile };
}

async function close(b) {
  await b.browser.close();
  fs.rmSync(b.profile, { recursive: true, force: true });
}

async function shot(page, name, full) {
  fs.mkdirSync(cfg.shots, { recursive: true });
  const file = path.join(cfg.shots, name + '.png');
  await page.screenshot({ path: file, fullPage: !!full });
  return file;
}

async function waitFor(page, fn, timeoutMs, what, ...args) {
  try {
    return await page.waitForFunction(fn, { timeout: timeoutMs, polling: 100 }, ...args);
  } catch (e) {
    throw new Error('timed out waiting for ' + what);
  }
}

/* The sign-in page, then the app. */
async function signIn(page, token) {
  await page.goto(cfg.url + '/ui', { waitUntil: 'load' });
  await page.waitForSelector('#signin-form #token');
  const signinShown = await page.$eval('#signin-form', (f) => f.offsetParent !== null);
  const png = await shot(page, 'signin-' + (token === cfg.viewer_token ? 'viewer' : 'operator'));
  await page.type('#token', token);
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#signin-submit')]);
  await page.waitForSelector('#who[data-user]');
  return { signinShown, png };
}

async function stubMode() {
  const r = await fetch(cfg.stub + '/_stub/state');
  return (await r.json()).mode;
}

async function timeline() {
  const b = await launch();
  const { page, log } = b;
  const out = {};
  try {
    const s = await signIn(page, cfg.operator_token);
    out.signin_shown = s.signinShown;
    await page.goto(cfg.url + '/ui#/timeline');
    await page.waitForSelector('#chart-rate canvas');
    await waitFor(page, () => window.TG && TG.state.timeline && TG.state.timeline.points() > 0, 20000, 'points');
    /* live: new points keep coming (at most 2 s late) */
    const p0 = await page.evaluate(() => TG.state.timeline.cols.t[TG.state.timeline.cols.t.length - 1]);
    await waitFor(page, (p) => TG.state.timeline.cols.t[TG.state.timeline.cols.t.length - 1] > p, 4000, 'a new live point', p0);
    const lag = await page.evaluate(() => Date.now() / 1000 - TG.state.timeline.cols.t[TG.state.timeline.cols.t.length - 1]);
    out.live_lag_s = lag;
    /* the hold band, while the stub answers 503 */
    await waitFor(page, () => Number(document.getElementById('band-hold').getAttribute('data-count')) >= 1, cfg.hold_wait_ms || 90000, 'the hold band');
    out.mode_when_band = await stubMode();
    /* a few more seconds of the hold, for the picture */
    await sleep(3000);
    out.band_hold = await page.$eval('#band-hold', (e) => Number(e.getAttribute('data-count')));
    out.series = await page.evaluate(() => {
      const c = TG.state.timeline.cols;
      const nz = (k) => c[k].filter((v) => v !== null && v > 0).length;
      return { points: c.t.length, starts_nonzero: nz('starts'), closes_nonzero: nz('closes'), in_flight_nonzero: nz('in_flight'), held: nz('held') };
    });
    out.canvases = await page.$$eval('.chart canvas', (cs) => cs.length);
    out.timeline_png = await shot(page, 'timeline');
    out.timeline_errors = log.errors.slice();
    out.timeline_failed = log.failed.slice();
    /* the other pages, for the record */
    await page.goto(cfg.url + '/ui#/status');
    await page.waitForSelector('#status-facts');
    out.status_owner_alive = await page.$eval('#status-owner', (e) => e.getAttribute('data-alive'));
    out.backlog_labels = await page.$$eval('#status-backlog dt', (d) => d.map((e) => [e.getAttribute('data-state'), e.textContent]));
    /* the server's words, each with a label in every language (i18n.js) */
    out.vocabularies = await page.evaluate(() => TG.state.session.vocabularies);
    out.missing_translations = await page.evaluate(() => TG.missingTranslations(TG.state.session.vocabularies));
    await shot(page, 'status', true);
    await page.goto(cfg.url + '/ui#/ops?state=succeeded');
    await page.waitForSelector('#ops-rows tr[data-op]');
    out.succeeded_rows = await page.$$eval('#ops-rows tr[data-op]', (r) => r.length);
    out.state_tabs = await page.$$eval('#state-tabs a', (a) => a.map((e) => e.getAttribute('data-state')));
    const first = await page.$eval('#ops-rows tr[data-op]', (r) => r.getAttribute('data-op'));
    await shot(page, 'operations');
    await page.goto(cfg.url + '/ui#/op/' + encodeURIComponent(first));
    await page.waitForSelector('#op-calls tr[data-call]');
    out.op_calls = await page.$$eval('#op-calls tr[data-call]', (r) => r.length);
    await shot(page, 'operation', true);
    /* Traditional Chinese, chosen with the switch */
    await page.goto(cfg.url + '/ui#/timeline');
    await page.waitForSelector('#chart-rate canvas');
    await page.click('#lang-switch button[data-lang="zh-TW"]');
    await waitFor(page, () => document.documentElement.lang === 'zh-TW', 5000, 'zh-TW');
    out.zh_nav = await page.$eval('#nav a[data-view="manual"]', (e) => e.textContent);
    await sleep(500);
    await shot(page, 'timeline-zh-TW');
    out.errors = log.errors;
  } finally {
    await close(b);
  }
  return out;
}

async function desk() {
  const b = await launch();
  const { page, log } = b;
  const out = {};
  try {
    await signIn(page, cfg.operator_token);
    await page.goto(cfg.url + '/ui#/manual');
    const row = '#manual-rows tr[data-op="' + cfg.resend_op + '"]';
    await page.waitForSelector(row);
    out.amount_text = await page.$eval(row + ' td.num', (e) => e.textContent);
    out.viewer_note = (await page.$('#viewer-note')) !== null;
    await shot(page, 'manual-desk', true);
    await page.click(row + ' button.resend');
    await page.waitForSelector(row + ' button.confirm-resend');
    await page.type(row + ' input.note', 'provider confirmed nothing was refunded');
    await page.click(row + ' button.confirm-resend');
    await page.waitForSelector(row + '.done');
    out.row_state = await page.$eval(row + ' td:last-child', (e) => e.textContent);
    out.toast = await page.$eval('#toast', (e) => e.textContent);
    await shot(page, 'manual-desk-resent', true);
    out.errors = log.errors.slice();
    /* a POST without the CSRF token, from the signed-in page itself */
    out.no_csrf_status = await page.evaluate(async (id) => {
      const r = await fetch('/ui/api/ops/' + id + '/resolve', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ outcome: 'succeeded', note: 'no token' }),
      });
      return r.status;
    }, cfg.viewer_op);
  } finally {
    await close(b);
  }
  return out;
}

/* One operation's events and their deliveries, then the failed deliveries
 * list: the re-deliver button of cfg.event_id clicked for real. */
async function deliveries() {
  const b = await launch();
  const { page, log } = b;
  const out = {};
  try {
    await signIn(page, cfg.operator_token);
    await page.goto(cfg.url + '/ui#/op/' + encodeURIComponent(cfg.event_op));
    await page.waitForSelector('#op-events tr[data-event]');
    out.op_events = await page.$$eval('#op-events tr[data-event]', (rows) =>
      rows.map((r) => ({
        id: Number(r.getAttribute('data-event')),
        delivery: r.querySelector('.delivery').getAttribute('data-delivery'),
        delivery_text: r.querySelector('.delivery').textContent,
        attempts: Number(r.querySelector('.attempts').textContent),
        last_error: r.querySelector('.last-error').textContent,
      })));
    await shot(page, 'operation-events', true);
    await page.goto(cfg.url + '/ui#/deliveries');
    await page.waitForSelector('#deliveries-rows tr');
    const row = '#deliveries-rows tr[data-event="' + cfg.event_id + '"]';
    /* older failures come first: page on until the event is listed */
    for (let i = 0; i < 40 && !(await page.$(row)); i++) {
      const more = await page.$('#deliveries-more:not([hidden])');
      if (!more) break;
      const n = await page.$$eval('#deliveries-rows tr', (x) => x.length);
      await more.click();
      await waitFor(page, (k) => document.querySelectorAll('#deliveries-rows tr').length > k, 10000, 'the next page', n);
    }
    await page.waitForSelector(row, { timeout: 5000 });
    out.listed_delivery = await page.$eval(row + ' .delivery', (e) => e.getAttribute('data-delivery'));
    out.rows = await page.$$eval('#deliveries-rows tr[data-event]', (x) => x.length);
    await shot(page, 'deliveries', true);
    await page.click(row + ' button.redeliver');
    await page.waitForSelector(row + '.done');
    out.after_delivery = await page.$eval(row + ' .delivery', (e) => e.getAttribute('data-delivery'));
    out.after_attempts = await page.$eval(row + ' .attempts', (e) => Number(e.textContent));
    out.toast = await page.$eval('#toast', (e) => e.textContent);
    await shot(page, 'deliveries-redelivered', true);
    /* the same page in the other language */
    await page.evaluate(() => TG.setLang('zh-TW'));
    await sleep(200);
    out.zh_nav = await page.$eval('#nav a[data-view="deliveries"]', (e) => e.textContent);
    out.errors = log.errors.slice();
  } finally {
    await close(b);
  }
  return out;
}

/* Four-eyes (manual.approval_above): another operator asked to re-send
 * cfg.approve_op; its approve button, clicked for real, carries it out. */
async function approve() {
  const b = await launch();
  const { page, log } = b;
  const out = {};
  try {
    await signIn(page, cfg.operator_token);
    await page.goto(cfg.url + '/ui#/manual');
    const row = '#manual-rows tr[data-op="' + cfg.approve_op + '"]';
    await page.waitForSelector(row);
    await page.click(row + ' button.approve');
    await page.waitForSelector(row + '.done');
    out.toast = await page.$eval('#toast', (e) => e.textContent);
    await shot(page, 'manual-desk-approved', true);
    out.errors = log.errors.slice();
  } finally {
    await close(b);
  }
  return out;
}

async function viewer() {
  const b = await launch();
  const { page } = b;
  const out = {};
  try {
    const s = await signIn(page, cfg.viewer_token);
    out.signin_shown = s.signinShown;
    out.role = await page.evaluate(() => document.body.getAttribute('data-role'));
    await page.goto(cfg.url + '/ui#/manual');
    await page.waitForSelector('#manual-rows tr[data-op="' + cfg.viewer_op + '"]');
    out.resend_buttons = await page.$$eval('button.resend', (x) => x.length);
    out.resolve_buttons = await page.$$eval('button.resolve', (x) => x.length);
    out.viewer_note = (await page.$('#viewer-note')) !== null;
    await shot(page, 'manual-desk-viewer', true);
    /* the failed deliveries: listed, but no re-deliver button */
    await page.goto(cfg.url + '/ui#/deliveries');
    await page.waitForSelector('#deliveries-rows tr[data-event]');
    out.redeliver_buttons = await page.$$eval('button.redeliver', (x) => x.length);
    /* the POST itself, with the viewer's own valid CSRF token: 403 */
    out.post_status = await page.evaluate(async (id) => {
      const sess = await (await fetch('/ui/api/session', { credentials: 'same-origin' })).json();
      const r = await fetch('/ui/api/ops/' + id + '/resend', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': sess.csrf },
        body: '{}',
      });
      return r.status;
    }, cfg.viewer_op);
    /* the whole run on one timeline, for the record (and the README) */
    await page.goto(cfg.url + '/ui#/timeline');
    await page.waitForSelector('#chart-backlog canvas');
    await waitFor(page, () => TG.state.timeline && TG.state.timeline.points() > 0, 10000, 'points');
    await page.setViewport({ width: 1280, height: 1150 });
    await sleep(300);
    await shot(page, 'timeline-whole-run');
    /* the session cookie is not readable by scripts */
    out.cookie_visible = await page.evaluate(() => document.cookie.indexOf('tg_session') >= 0);
    out.local_storage = await page.evaluate(() => JSON.stringify(Object.assign({}, window.localStorage)));
  } finally {
    await close(b);
  }
  return out;
}

/* The page `tollgate report --config --from` wrote: it opens from a file,
 * draws the same charts and bands, and asks nothing of any network. */
async function report() {
  const b = await launch();
  const { page, log } = b;
  const out = { requests: [] };
  try {
    page.on('request', (r) => out.requests.push(r.url().slice(0, 120)));
    await page.goto('file://' + cfg.report, { waitUntil: 'load' });
    await page.waitForSelector('#chart-backlog canvas');
    out.points = await page.$eval('#timeline-info', (e) => Number(e.getAttribute('data-points')));
    out.band_hold = await page.$eval('#band-hold', (e) => Number(e.getAttribute('data-count')));
    out.canvases = await page.$$eval('.chart canvas', (cs) => cs.length);
    await page.setViewport({ width: 1280, height: 1150 });
    await shot(page, 'report');
    out.errors = log.errors;
  } finally {
    await close(b);
  }
  return out;
}

/* Two accounts: the header's switcher chooses the account the status shows;
 * an admin pauses account b from its controls (clicked for real) and sees
 * it paused there, while account a stays running; an operator who is no
 * admin gets no form, and the POST itself is 403. */
async function accounts() {
  const b = await launch();
  const { page, log } = b;
  const out = {};
  try {
    await signIn(page, cfg.admin_token);
    await page.goto(cfg.url + '/ui#/status');
    await page.waitForSelector('#account-select');
    out.choices = await page.$$eval('#account-select option', (o) => o.map((x) => x.value));
    await page.waitForSelector('#account-controls[data-account="a"]');
    await page.select('#account-select', 'b');
    await page.waitForSelector('#account-controls[data-account="b"]');
    out.title = await page.$eval('#view h2', (e) => e.textContent);
    out.limits_b = await page.evaluate(() => TG.state.live.limits.starts_per_second);
    await page.type('#acct-reason', 'provider asked us to stop');
    await page.click('#acct-pause');
    await page.waitForSelector('#account-controls[data-account="b"][data-paused="1"]', { timeout: 10000 });
    out.toast = await page.$eval('#toast', (e) => e.textContent);
    out.paused_text = await page.$eval('#acct-paused', (e) => e.textContent);
    await shot(page, 'status-account-paused', true);
    await page.select('#account-select', 'a');
    await page.waitForSelector('#account-controls[data-account="a"]');
    out.a_paused = await page.$eval('#account-controls', (e) => e.getAttribute('data-paused'));
    out.limits_a = await page.evaluate(() => TG.state.live.limits.starts_per_second);
    out.errors = log.errors.slice();
  } finally {
    await close(b);
  }
  const v = await launch();
  try {
    await signIn(v.page, cfg.operator_token);
    await v.page.goto(cfg.url + '/ui#/status');
    await v.page.waitForSelector('#account-controls');
    out.operator_form = (await v.page.$('#acct-form')) !== null;
    out.operator_note = (await v.page.$('#acct-not-admin')) !== null;
    out.operator_post = await v.page.evaluate(async () => {
      const sess = await (await fetch('/ui/api/session', { credentials: 'same-origin' })).json();
      const r = await fetch('/ui/api/accounts/a', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': sess.csrf },
        body: JSON.stringify({ paused: true, reason: 'not mine to do' }),
      });
      return r.status;
    });
  } finally {
    await close(v);
  }
  return out;
}

const steps = { timeline, desk, deliveries, approve, viewer, report, accounts };

(async () => {
  const step = steps[process.argv[2]];
  if (!step) throw new Error('unknown step ' + process.argv[2]);
  const out = await step();
  process.stdout.write(JSON.stringify(out) + '\n');
})().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
