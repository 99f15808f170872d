/*
 * dashboard.test.js - the dashboard in a real browser: Debian's headless Chromium
 * (/usr/bin/chromium, never a downloaded one) driven by puppeteer-core.
 *
 *   node tests/browser/dashboard.test.js BUILD/dpbudgetd OUTDIR
 *
 * Starts real daemons with a populated ledger (some clients exhausted, several rounds), loads
 * every view, checks that the numbers shown are the API's, that paging and search work, that
 * polling revalidates with If-None-Match (304), that a missing, wrong or under-scoped API key
 * is explained, and saves a screenshot of each view in OUTDIR. Closing line:
 * "browser: N passed, M failed". Bounded: every wait has a timeout, the run a deadline.
 */
'use strict';

const {spawn} = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const puppeteer = require('puppeteer-core');

const DAEMON = path.resolve(process.argv[2] || 'build/dpbudgetd');
const OUT = path.resolve(process.argv[3] || 'build/browser');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT = 10000;
const DEADLINE_MS = 240000;

let passed = 0, failed = 0;
const daemons = [];
let browser = null;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dpb-browser-'));

const fullDirs = []; /* mount points of the full-disk daemons (empty here: mounted in theirs) */

function cleanup() {
    for (const d of daemons) try { d.kill('SIGTERM'); } catch (e) { /* gone */ }
    for (const f of fullDirs) for (const x of [f, f + '.port']) try { fs.rmSync(x, {recursive: true, force: true}); } catch (e) { /* best effort */ }
    try { fs.rmSync(tmp, {recursive: true, force: true}); } catch (e) { /* best effort */ }
}

const deadline = setTimeout(() => {
    console.log(`browser: the run passed its ${DEADLINE_MS / 1000} s deadline`);
    console.log(`browser: ${passed} passed, ${failed + 1} failed`);
    cleanup();
    process.exit(1);
}, DEADLINE_MS);

/* the path of a screenshot in OUT, printed so that the run says where it is */
function shot(name) {
    const p = path.join(OUT, name);
    console.log(`     screenshot ${p}`);
    return p;
}

function assert(cond, msg) {
    if (!cond) throw new Error(msg);
}

function eq(got, want, what) {
    assert(got === want, `${what}: shown ${JSON.stringify(got)}, the API says ${JSON.stringify(want)}`);
}

/* a number shown for people: at most 4 significant digits, and within 0.1 % of the API's */
function shownClose(text, raw, what, dir) {
    const v = Number(text.replace(/[ %,]/g, ''));
    assert(isFinite(v), `${what}: '${text}' is not a number`);
    assert(text.replace(/[^0-9]/g, '').replace(/^0+/, '').length <= 6,
           `${what}: '${text}' shows too many digits`);
    const tol = Math.abs(raw) * 1e-3 + 1e-12;
    assert(Math.abs(v - raw) <= tol, `${what}: shown ${text}, the API says ${raw}`);
    if (dir === 'up') assert(v >= raw, `${what}: ${text} is rounded below the API's ${raw}`);
    if (dir === 'down') assert(v <= raw, `${what}: ${text} is rounded above the API's ${raw}`);
}

/* BROWSER_ONLY=text runs only the tests whose name contains it (later tests may rely on the
 * views the earlier ones left open: for working on one test, not for a verdict) */
async function test(name, fn) {
    if (process.env.BROWSER_ONLY && !name.includes(process.env.BROWSER_ONLY)) return;
    try {
        await fn();
        passed++;
        console.log(`ok   ${name}`);
    } catch (e) {
        failed++;
        console.log(`FAIL ${name}: ${e && e.message ? e.message : e}`);
    }
}

/* ---- daemons -------------------------------------------------------------------------------- */

async function startDaemon(name, extra) {
    const dir = path.join(tmp, name);
    fs.mkdirSync(dir);
    const portFile = path.join(dir, 'port');
    const d = spawn(DAEMON, ['--port', '0', '--port-file', portFile, '--data-dir', path.join(dir, 'data'),
                             '--no-request-log', '--threads', '2', ...extra],
                    {stdio: ['ignore', 'ignore', fs.openSync(path.join(tmp, name + '.log'), 'w')]});
    daemons.push(d);
    for (let i = 0; i < 100; i++) {
        if (fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim())
            return 'http://127.0.0.1:' + fs.readFileSync(portFile, 'utf8').trim();
        await new Promise(r => setTimeout(r, 50));
    }
    throw new Error(`${name}: the daemon did not start`);
}

/* A daemon whose data directory is a 2 MiB tmpfs, mounted in a mount namespace of the
 * daemon's own (unshare -m, as root: the mount vanishes with the daemon). Returns its base URL
 * and the directory as seen from here (through /proc/PID/root), where fill() fills it. */
async function startFullDiskDaemon() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dpb-full-'));
    fullDirs.push(dir);
    const portFile = dir + '.port';
    const script = 'mount --make-rprivate / && mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@"';
    const d = spawn('unshare', ['-m', 'sh', '-c', script, 'sh', dir, DAEMON, '--port', '0', '--port-file', portFile,
                                '--data-dir', path.join(dir, 'data'), '--no-request-log', '--threads', '2'],
                    {stdio: ['ignore', 'ignore', fs.openSync(path.join(tmp, 'full.log'), 'w')]});
    daemons.push(d);
    for (let i = 0; i < 100; i++) {
        if (fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim())
            return {base: 'http://127.0.0.1:' + fs.readFileSync(portFile, 'utf8').trim(),
                    dir: `/proc/${d.pid}/root${dir}`};
        await new Promise(r => setTimeout(r, 50));
    }
    throw new Error('the daemon on a tmpfs did not start: ' + fs.readFileSync(path.join(tmp, 'full.log'), 'utf8'));
}

/* fill the file system of dir until no block is left */
function fill(dir) {
    const fd = fs.openSync(path.join(dir, 'filler'), 'w');
    const block = Buffer.alloc(4096);
    try {
        for (let i = 0; i < 1 << 20; i++) fs.writeSync(fd, block);
    } catch (e) {
        if (e.code !== 'ENOSPC') throw e;
    } finally {
        fs.closeSync(fd);
    }
}

async function call(base, method, p, body, token) {
    const headers = {};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (token) headers.Authorization = 'Bearer ' + token;
    const r = await fetch(base + p, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
    return {status: r.status, json, text, headers: r.headers};
}

const ID = i => 'c' + String(i).padStart(2, '0');
const NCLIENTS = 57;

/* 57 clients with labels, eight rounds of overlapping subsets: the busiest exhaust their
 * budget and later rounds refuse them; one round names an unknown client. */
async function populate(base, token) {
    for (let i = 0; i < NCLIENTS; i++) {
        const r = await call(base, 'PUT', '/v1/clients/' + ID(i),
                             {budget: {epsilon: i % 7 === 3 ? 4 : 2, delta: 1e-5},
                              labels: {site: ['a', 'b', 'c'][i % 3], tier: i % 5 === 0 ? 'gold' : 'std'}},
                             token);
        assert(r.status === 201, `PUT client ${ID(i)}: ${r.status} ${r.text}`);
    }
    for (let k = 0; k < 8; k++) {
        const parts = [];
        for (let i = 0; i < NCLIENTS; i++) if (i % (k % 4 + 1) === 0 || i < 4) parts.push(ID(i));
        if (k === 5) parts.push('ghost');
        if (k === 4) {
            /* a round that already ran is recorded even past the budget: c00-c03 exhaust */
            const r = await call(base, 'POST', '/v1/rounds',
                                 {round_id: 'ran', already_ran: true, participants: [ID(0), ID(1), ID(2), ID(3)],
                                  event: {class_name: 'GaussianDpEvent', noise_multiplier: 0.5}}, token);
            assert(r.status === 200, `round ran: ${r.status} ${r.text}`);
        }
        const r = await call(base, 'POST', '/v1/rounds',
                             {round_id: 'r' + k, policy: 'admit_eligible', participants: parts,
                              event: {class_name: 'GaussianDpEvent', noise_multiplier: 4}}, token);
        assert(r.status === 200, `round r${k}: ${r.status} ${r.text}`);
    }
}

/* ---- the browser ---------------------------------------------------------------------------- */

async function newPage(ctx, log) {
    const page = await ctx.newPage();
    await page.setViewport({width: 1280, height: 900});
    page.setDefaultTimeout(WAIT);
    /* script errors and CSP violations; a 404 or 401 the page asked for is not one */
    page.on('console', m => {
        if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) log.push(m.text());
    });
    page.on('pageerror', e => log.push('page error: ' + e.message));
    return page;
}

const text = (page, sel) => page.$eval(sel, el => el.textContent.trim());
const raw = (page, sel) => page.$eval(sel, el => el.getAttribute('data-raw'));
/* Clicks and selections happen inside the page in one step: the views re-render while they
 * poll, so an element handle taken first can be detached by the time it is used. */
const click = (page, sel) => page.waitForSelector(sel, {timeout: WAIT}).then(() => page.$eval(sel, el => el.click()));
const select = (page, sel, value) => page.$eval(sel, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
}, value);

async function waitText(page, sel, want) {
    await page.waitForFunction((s, w) => {
        const el = document.querySelector(s);
        return el && el.textContent.trim() === w;
    }, {timeout: WAIT}, sel, want).catch(async () => {
        const got = await page.$eval(sel, el => el.textContent.trim()).catch(() => '(absent)');
        throw new Error(`${sel}: waited for '${want}', shows '${got}'`);
    });
}

/* nothing shown as null, undefined or NaN, and no 17-digit number */
async function clean(page, what) {
    const t = await page.$eval('main', m => m.textContent);
    const bad = /\bnull\b|undefined|NaN|\d\.\d{9,}/.exec(t);
    assert(!bad, `${what} shows '${bad && bad[0]}'`);
}

async function rowIds(page) {
    return page.$$eval('#cl-table tbody tr', trs => trs.map(t => t.getAttribute('data-id')));
}

async function main() {
    fs.mkdirSync(OUT, {recursive: true});
    assert(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: run scripts/deps.sh (Debian package chromium)`);
    const base = await startDaemon('open', []);
    await populate(base);

    /* a second daemon with API keys (every scope includes read, so no key is refused the
     * dashboard's reads with 403: the page's 403 message is not reachable here) */
    const readTok = crypto.randomBytes(16).toString('hex');
    const adminTok = crypto.randomBytes(16).toString('hex');
    const sha = t => crypto.createHash('sha256').update(t).digest('hex');
    const keys = path.join(tmp, 'api-keys');
    fs.writeFileSync(keys, `${sha(readTok)} read operator\n${sha(adminTok)} admin trainer\n`);
    const kbase = await startDaemon('keys', ['--api-keys', keys]);
    await populate(kbase, adminTok);

    browser = await puppeteer.launch({
        executablePath: CHROMIUM,
        headless: true,
        userDataDir: path.join(tmp, 'profile'),
        args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
               '--disable-background-networking', '--disable-component-update', '--disable-sync',
               '--disable-dev-shm-usage'],
    });
    const log = [];
    const ctx = await browser.createBrowserContext();
    const page = await newPage(ctx, log);
    const seen = [];
    page.on('response', r => seen.push({url: r.url(), status: r.status()}));

    await test('the page and its assets come from the daemon, with a Content-Security-Policy', async () => {
        const r = await call(base, 'GET', '/');
        eq(r.status, 200, 'GET /');
        const csp = r.headers.get('content-security-policy') || '';
        assert(/script-src 'self'/.test(csp) && /default-src 'none'/.test(csp), `CSP '${csp}'`);
        assert(!/<script>/.test(r.text) && !/https?:\/\//.test(r.text.replace(/xmlns="[^"]*"/g, '')),
               'the page has an inline script or an external URL');
        for (const a of ['/ui/app.js', '/ui/app.css', '/ui/charts.js']) {
            const x = await call(base, 'GET', a);
            eq(x.status, 200, 'GET ' + a);
            assert(!/https?:\/\/(?!www\.w3\.org\/2000\/svg)/.test(x.text), `${a} names an external URL`);
        }
        eq((await call(base, 'GET', '/ui/nothing.js')).status, 404, 'GET /ui/nothing.js');
    });

    await test('overview shows the summary\'s numbers', async () => {
        await page.goto(base + '/?poll=400', {waitUntil: 'load'});
        await page.waitForSelector('#ov-clients');
        const S = (await call(base, 'GET', '/v1/summary')).json;
        eq(Number(await raw(page, '#ov-clients')), S.clients, 'clients');
        eq(await text(page, '#ov-clients'), String(S.clients), 'clients (text)');
        eq(await text(page, '#ov-active'), S.by_status.active.toLocaleString('en-US'), 'active');
        eq(await text(page, '#ov-exhausted'), S.by_status.exhausted.toLocaleString('en-US'), 'exhausted');
        assert(S.by_status.exhausted > 0, 'the populated ledger has exhausted clients');
        eq(await text(page, '#ov-uncertified'), String(S.by_status.uncertified), 'uncertified');
        eq(await text(page, '#ov-rounds'), String(S.rounds), 'rounds');
        eq(Number(await raw(page, '#ov-logbytes')), S.log_bytes, 'log bytes');
        eq(await text(page, '#ov-readonly'), S.read_only ? 'READ-ONLY (restart after fixing the disk)' : 'accepted',
           'read-only');
        const bins = await page.$$eval('#chart-spent rect[data-from]', rs => rs.map(r => Number(r.getAttribute('data-count'))));
        eq(JSON.stringify(bins), JSON.stringify(S.spent_fraction_histogram.map(b => b.clients)), 'spent histogram');
        const fsync = await raw(page, '#ov-fsync-count');
        assert(Number(fsync) > 0, `fsync count ${fsync}`);
        const refusals = Number(await raw(page, '#ov-refusals'));
        assert(refusals > 0, `refusals ${refusals}`);
        await clean(page, 'overview');
        await page.screenshot({path: shot('overview.png'), fullPage: true});
    });

    await test('polling revalidates with If-None-Match (304) and picks up a change', async () => {
        const S = (await call(base, 'GET', '/v1/summary')).json;
        const t0 = Date.now();
        while (!seen.some(x => x.url.endsWith('/v1/summary') && x.status === 304) && Date.now() - t0 < WAIT)
            await new Promise(r => setTimeout(r, 100));
        assert(seen.some(x => x.url.endsWith('/v1/summary') && x.status === 304), 'no 304 for /v1/summary');
        const r = await call(base, 'POST', '/v1/rounds', {round_id: 'late', participants: [ID(50)],
                                                          event: {class_name: 'GaussianDpEvent', noise_multiplier: 8}});
        eq(r.status, 200, 'a late round');
        await waitText(page, '#ov-rounds', String(S.rounds + 1));
        /* the history chart picks the round up at the next poll too */
        await page.waitForFunction(want => {
            const p = document.querySelector('#chart-hist-rounds path[data-series="rounds"]');
            return p && Number(p.getAttribute('data-sum')) === want;
        }, {timeout: WAIT}, S.rounds + 1).catch(async () => {
            throw new Error('the rounds over time do not sum to ' + (S.rounds + 1) + ': ' +
                            await page.$eval('#chart-hist-rounds path[data-series="rounds"]',
                                             p => p.getAttribute('data-sum')).catch(() => '(no chart)'));
        });
        await page.screenshot({path: shot('overview-polled.png'), fullPage: true});
    });

    await test('clients: paging follows the API\'s pages', async () => {
        await page.goto(base + '/?poll=400#/clients', {waitUntil: 'load'});
        await page.waitForSelector('#cl-table');
        await select(page, '#cl-limit', '10');
        await waitText(page, '#cl-range', `1–10 of ${NCLIENTS}`);
        const p1 = (await call(base, 'GET', '/v1/clients?sort=id&order=asc&limit=10')).json;
        eq(JSON.stringify(await rowIds(page)), JSON.stringify(p1.clients.map(c => c.id)), 'page 1');
        await click(page, '#cl-next');
        await waitText(page, '#cl-range', `11–20 of ${NCLIENTS}`);
        const p2 = (await call(base, 'GET', '/v1/clients?sort=id&order=asc&limit=10&cursor=' + p1.next_cursor)).json;
        eq(JSON.stringify(await rowIds(page)), JSON.stringify(p2.clients.map(c => c.id)), 'page 2');
        await click(page, '#cl-prev');
        await waitText(page, '#cl-range', `1–10 of ${NCLIENTS}`);
        for (let i = 0; i < 5; i++) await click(page, '#cl-next').then(() => waitText(page, '#cl-range',
            i < 4 ? `${(i + 1) * 10 + 1}–${(i + 2) * 10} of ${NCLIENTS}` : `51–${NCLIENTS} of ${NCLIENTS}`));
        assert(await page.$eval('#cl-next', b => b.disabled), 'next is enabled on the last page');
    });

    await test('clients: sort by spent, and the numbers shown are the API\'s', async () => {
        await select(page, '#cl-sort', 'spent');
        await select(page, '#cl-order', 'desc');
        await waitText(page, '#cl-range', `1–10 of ${NCLIENTS}`);
        const L = (await call(base, 'GET', '/v1/clients?sort=spent&order=desc&limit=10')).json;
        await page.waitForFunction(first => {
            const tr = document.querySelector('#cl-table tbody tr');
            return tr && tr.getAttribute('data-id') === first;
        }, {timeout: WAIT}, L.clients[0].id);
        eq(JSON.stringify(await rowIds(page)), JSON.stringify(L.clients.map(c => c.id)), 'sorted ids');
        const spent = await page.$$eval('#cl-table span.spent', ss => ss.map(s => [s.getAttribute('data-raw'), s.textContent]));
        const fr = await page.$$eval('#cl-table span.frac', ss => ss.map(s => [s.getAttribute('data-raw'), s.textContent]));
        L.clients.forEach((c, i) => {
            eq(Number(spent[i][0]), c.spent.epsilon, `spent of ${c.id}`);
            shownClose(spent[i][1], c.spent.epsilon, `spent of ${c.id}`, 'up');
            shownClose(fr[i][1], 100 * c.spent.epsilon / c.budget.epsilon, `spent fraction of ${c.id}`, 'up');
        });
        await clean(page, 'clients');
        await page.screenshot({path: shot('clients.png'), fullPage: true});
    });

    await test('clients: search by label and by id', async () => {
        await select(page, '#cl-sort', 'id');
        await select(page, '#cl-order', 'asc');
        const L = (await call(base, 'GET', '/v1/clients?label=site%3Db&limit=10')).json;
        await page.$eval('#cl-search', el => { el.value = 'site=b'; });
        await click(page, '#cl-go');
        await waitText(page, '#cl-range', `1–${Math.min(10, L.total)} of ${L.total}`);
        eq(JSON.stringify(await rowIds(page)), JSON.stringify(L.clients.map(c => c.id)), 'label search');
        await page.$eval('#cl-search', el => { el.value = 'c07'; });
        await click(page, '#cl-go');
        await waitText(page, '#cl-range', '1–1 of 1');
        eq(JSON.stringify(await rowIds(page)), '["c07"]', 'id search');
        await page.$eval('#cl-search', el => { el.value = 'nobody'; });
        await click(page, '#cl-go');
        await waitText(page, '#cl-range', 'no clients match');
        await click(page, '#cl-clear');
        await waitText(page, '#cl-range', `1–10 of ${NCLIENTS}`);
    });

    await test('clients: a slow answer to an older search never replaces a newer one', async () => {
        /* the answer to the search 'nobody' is held back 1.5 s; meanwhile the search is
         * cleared and the whole list shown: the late answer must not replace it */
        const hold = req => {
            if (req.url().endsWith('/v1/clients/nobody')) setTimeout(() => req.continue().catch(() => {}), 1500);
            else req.continue().catch(() => {});
        };
        await page.setRequestInterception(true);
        page.on('request', hold);
        try {
            await page.$eval('#cl-search', el => { el.value = 'nobody'; });
            await click(page, '#cl-go');
            await new Promise(r => setTimeout(r, 100));
            await click(page, '#cl-clear');
            await waitText(page, '#cl-range', `1–10 of ${NCLIENTS}`);
            await new Promise(r => setTimeout(r, 2500)); /* the held answer has come back */
            eq(await text(page, '#cl-range'), `1–10 of ${NCLIENTS}`, 'the range after the late answer');
            assert((await rowIds(page)).includes('c00'), 'c00 is no longer listed');
        } finally {
            page.off('request', hold);
            await page.setRequestInterception(false);
        }
    });

    await test('one client: budget, spent, remaining, and its spend over its rounds from the API', async () => {
        await click(page, '#cl-table tbody tr[data-id="c00"] a');
        await waitText(page, '#c-id', 'c00');
        const C = (await call(base, 'GET', '/v1/clients/c00')).json;
        eq(Number(await raw(page, '#c-budget-eps')), C.budget.epsilon, 'budget');
        eq(Number(await raw(page, '#c-spent')), C.spent.epsilon, 'spent');
        shownClose(await text(page, '#c-spent'), C.spent.epsilon, 'spent', 'up');
        eq(Number(await raw(page, '#c-remaining')), C.remaining.epsilon, 'remaining');
        shownClose(await text(page, '#c-remaining'), C.remaining.epsilon, 'remaining', 'down');
        eq(await text(page, '#c-rounds'), String(C.rounds), 'rounds');
        eq(await text(page, '#c-status'), C.status, 'status');
        assert(!/planned|does not list/.test(await text(page, '#c-history-note')),
               'the history note still says the history is not available');
        const Hc = (await call(base, 'GET', '/v1/clients/c00/rounds?limit=1000')).json;
        const charged = Hc.charges.filter(x => x.state === 'charged' && typeof x.spent_after === 'number')
                                  .sort((x, y) => x.seq - y.seq);
        assert(charged.length >= 2, `c00 has ${charged.length} charged rounds in its history`);
        assert(charged.every(x => typeof x.time === 'string'), 'the history has times: ' + JSON.stringify(Hc.charges[0]));
        await page.waitForSelector('#chart-client path[data-series="spent ε after the round"]');
        const line = await page.$eval('#chart-client path[data-series="spent ε after the round"]',
                                      p => [Number(p.getAttribute('data-points')), Number(p.getAttribute('data-last'))]);
        eq(line[0], charged.length, 'points of the spend chart');
        eq(line[1], charged[charged.length - 1].spent_after, 'the last point of the spend chart');
        const rows = await page.$$eval('#c-history-table tbody tr', trs => trs.map(t => [
            t.getAttribute('data-round'), t.children[1].textContent, t.children[2].textContent]));
        eq(JSON.stringify(rows.map(r => r[0])), JSON.stringify(Hc.charges.slice().sort((x, y) => y.seq - x.seq).map(x => x.round_id)),
           'the rounds listed, newest first');
        for (const x of Hc.charges) {
            const r = rows.find(q => q[0] === x.round_id);
            eq(r[1], x.time.replace('T', ' ').replace('Z', ''), `time of ${x.round_id}`);
            eq(r[2], x.state, `state of ${x.round_id}`);
        }
        await clean(page, 'client');
        await page.screenshot({path: shot('client.png'), fullPage: true});
    });

    await test('compute: curves with Theorem 4.1 beside the exact accountant, and calibration', async () => {
        await page.goto(base + '/#/compute', {waitUntil: 'load'});
        await page.waitForSelector('#cv-form');
        await page.$eval('#cv-rounds', el => { el.value = '10000'; });
        await click(page, '#cv-go');
        await page.waitForSelector('#cv-thm41', {timeout: 30000});
        const body = {event: {class_name: 'ShuffledDpSgdEpochDpEvent', noise_multiplier: 1, rounds: 10000},
                      accountant: 'auto', epsilon_range: {min: 0, max: 4, points: 41}, tradeoff_points: 41};
        const C = (await call(base, 'POST', '/v1/curve', body)).json;
        eq(await text(page, '#cv-res-acct'), C.accountant, 'accountant');
        eq(await text(page, '#cv-res-guarantee'), C.guarantee, 'guarantee');
        eq(Number(await raw(page, '#cv-thm41')), C.theorem_4_1.delta, 'Theorem 4.1 delta');
        shownClose(await text(page, '#cv-thm41'), C.theorem_4_1.delta, 'Theorem 4.1 delta', 'up');
        const deltas = await page.$$eval('#cv-table span.cv-delta', ss => ss.map(s => Number(s.getAttribute('data-raw'))));
        eq(deltas[0], C.curve[0].delta, 'delta at epsilon 0');
        const series = await page.$$eval('#chart-delta path[data-series]', ps => ps.map(p => p.getAttribute('data-series')));
        assert(series.length === 2 && /Theorem 4.1/.test(series[1]), `delta chart series ${series}`);
        assert(await page.$('#chart-tradeoff path[data-series]'), 'no trade-off curve');
        await click(page, '#cb-go');
        await page.waitForSelector('#cb-value', {timeout: 30000});
        const K = (await call(base, 'POST', '/v1/calibrate', {
            event: {class_name: 'ShuffledDpSgdEpochDpEvent', noise_multiplier: 1}, accountant: 'auto',
            solve_for: 'rounds', target: {epsilon: 1, delta: 1e-6}})).json;
        eq(Number(await raw(page, '#cb-value')), K.value, 'calibrated rounds');
        eq(await text(page, '#cb-value'), K.value.toLocaleString('en-US'), 'calibrated rounds (text)');
        await clean(page, 'compute');
        await page.screenshot({path: shot('compute.png'), fullPage: true});
    });

    await test('compute: a slow answer to an older submission never replaces a newer one', async () => {
        /* the first calibration (target epsilon 1) is held back 1.5 s; the second (epsilon 2)
         * is answered first: the form must keep showing the second's answer */
        let held = false;
        const hold = req => {
            if (!held && req.url().endsWith('/v1/calibrate')) {
                held = true;
                setTimeout(() => req.continue().catch(() => {}), 1500);
            } else {
                req.continue().catch(() => {});
            }
        };
        await page.setRequestInterception(true);
        page.on('request', hold);
        try {
            await page.$eval('#cb-eps', el => { el.value = '1'; });
            await click(page, '#cb-go');
            await new Promise(r => setTimeout(r, 100));
            await page.$eval('#cb-eps', el => { el.value = '2'; });
            await click(page, '#cb-go');
            const K2 = (await call(base, 'POST', '/v1/calibrate', {
                event: {class_name: 'ShuffledDpSgdEpochDpEvent', noise_multiplier: 1}, accountant: 'auto',
                solve_for: 'rounds', target: {epsilon: 2, delta: 1e-6}})).json;
            await page.waitForFunction(v => {
                const e = document.querySelector('#cb-value');
                return e && Number(e.getAttribute('data-raw')) === v;
            }, {timeout: 30000}, K2.value);
            await new Promise(r => setTimeout(r, 2500)); /* the held answer has come back */
            eq(Number(await raw(page, '#cb-value')), K2.value, 'calibrated rounds after the late answer');
        } finally {
            page.off('request', hold);
            await page.setRequestInterception(false);
        }
    });

    /* the history charts' sums against GET /v1/history at the resolution shown */
    async function historyMatches(pg, b, res, png) {
        await pg.waitForSelector(`#ov-history[data-resolution="${res}"] #chart-hist-rounds path[data-series="rounds"]`);
        if (png) await pg.screenshot({path: shot(png), fullPage: true}); /* also when a check below fails */
        const from = await pg.evaluate(() => document.getElementById('ov-history-note').getAttribute('data-from'));
        const H = (await call(b, 'GET', `/v1/history?resolution=${res}&from=${encodeURIComponent(from)}`)).json;
        assert(H && Array.isArray(H.points), 'GET /v1/history: ' + JSON.stringify(H));
        const sum = k => H.points.reduce((a, p) => a + (p[k] || 0), 0);
        const drawn = async (chart, series) => pg.$eval(`#${chart} path[data-series="${series}"]`,
                                                        p => Number(p.getAttribute('data-sum')));
        eq(await drawn('chart-hist-rounds', 'rounds'), sum('rounds'), `rounds per ${res}, summed`);
        eq(await drawn('chart-hist-rounds', 'charges (clients charged)'), sum('charges'), `charges per ${res}, summed`);
        const eps = await drawn('chart-hist-eps', 'ε upper-bound increases, summed over the charges');
        eq(await raw(pg, '#ov-eps-note'), H.epsilon_spent_is, 'what the ε series is');
        assert(Math.abs(eps - sum('epsilon_spent')) <= 1e-9 * Math.max(1, eps), `ε spent per ${res}: drawn ${eps}, the API ${sum('epsilon_spent')}`);
        const reasons = new Map();
        for (const p of H.points) for (const [r, n] of Object.entries(p.refusals || {})) reasons.set(r, (reasons.get(r) || 0) + n);
        assert([...reasons.values()].some(n => n > 0), 'the history has refusals');
        for (const [r, n] of reasons) eq(await drawn('chart-hist-refusals', r), n, `refusals (${r}) per ${res}, summed`);
        const last = H.points.filter(p => p.by_status).sort((x, y) => Date.parse(x.start) - Date.parse(y.start)).pop();
        for (const k of ['active', 'exhausted', 'uncertified', 'stuck'])
            eq(await pg.$eval(`#chart-hist-status path[data-series="${k}"]`, p => Number(p.getAttribute('data-last'))),
               last.by_status[k], `clients ${k} at the last point`);
        return H;
    }

    await test('overview: history charts are drawn from GET /v1/history, the same after a reload', async () => {
        await page.goto(base + '/?h=1#/overview', {waitUntil: 'load'});
        const H = await historyMatches(page, base, 'minute', 'overview-history.png');
        const S = (await call(base, 'GET', '/v1/summary')).json;
        eq(H.points.reduce((a, p) => a + p.rounds, 0), S.rounds, 'the rounds of the history (all made in this run)');
        await page.reload({waitUntil: 'load'});
        await historyMatches(page, base, 'minute', 'overview-history-reloaded.png');
        await select(page, '#ov-res', 'hour');
        await page.waitForFunction(() => /#\/overview\?res=hour$/.test(location.hash), {timeout: WAIT});
        await historyMatches(page, base, 'hour');
        await page.reload({waitUntil: 'load'});
        await historyMatches(page, base, 'hour', 'overview-history-hour.png');
        eq(await page.$eval('#ov-res', s => s.value), 'hour', 'the resolution after a reload');
        await clean(page, 'overview (history)');
    });

    await test('the banner warns when clients exhaust fast (over 10 % of all within an hour)', async () => {
        /* every client of this ledger was made, and its exhausted ones exhausted, in this run */
        const S = (await call(base, 'GET', '/v1/summary')).json;
        assert(S.by_status.exhausted > 0.1 * S.clients, `${S.by_status.exhausted} of ${S.clients} exhausted`);
        await page.waitForSelector('#warnings p[data-cond="exhausting_fast"]');
        eq(Number(await raw(page, '#warnings p[data-cond="exhausting_fast"]')), S.by_status.exhausted,
           'clients exhausted in the last hour');
        assert(/check the rounds being charged/.test(await text(page, '#warnings p[data-cond="exhausting_fast"]')),
               'the warning says what to do');
    });

    await test('stuck clients: counted, in their own colour, in the banner, listed by the link', async () => {
        /* three clients with ε = 1 offered a round that cannot fit (σ = 0.3): refused for
         * their budget, spent nothing, so stuck rather than exhausted */
        for (const id of ['stuck-a', 'stuck-b', 'stuck-c'])
            eq((await call(base, 'PUT', '/v1/clients/' + id, {budget: {epsilon: 1, delta: 1e-5}})).status, 201, 'PUT ' + id);
        const R = await call(base, 'POST', '/v1/rounds', {round_id: 'too-costly', policy: 'admit_eligible',
                                                         participants: ['stuck-a', 'stuck-b', 'stuck-c'],
                                                         event: {class_name: 'GaussianDpEvent', noise_multiplier: 0.3}});
        eq(R.status, 200, 'the round that cannot fit: ' + R.text);
        await page.goto(base + '/?s=1#/overview', {waitUntil: 'load'});
        await page.waitForSelector('#ov-stuck');
        const S = (await call(base, 'GET', '/v1/summary')).json;
        assert(S.by_status.stuck > 0, 'the populated ledger has stuck clients: ' + JSON.stringify(S.by_status));
        eq(await text(page, '#ov-stuck'), String(S.by_status.stuck), 'stuck');
        const colours = await page.evaluate(() => ['#ov-stuck', '#ov-active', '#ov-exhausted', '#ov-uncertified'].map(
            q => getComputedStyle(document.querySelector(q)).color));
        assert(new Set(colours).size === 4, 'stuck is not in a colour of its own: ' + colours.join(', '));
        eq(await page.$eval('#chart-status rect.stuck', r => Number(r.getAttribute('data-count'))), S.by_status.stuck,
           'the stuck bar');
        await page.waitForSelector('#chart-hist-status path[data-series="stuck"]');
        eq(await page.$eval('#chart-hist-status path[data-series="stuck"]', p => Number(p.getAttribute('data-last'))),
           S.by_status.stuck, 'stuck clients over time, now');
        await page.waitForSelector('#warnings p[data-cond="stuck"]');
        eq(Number(await raw(page, '#warnings p[data-cond="stuck"]')), S.by_status.stuck, 'stuck in the banner');
        assert(!(await page.$eval('#warnings', w => w.hidden)), 'the banner is hidden');
        await page.screenshot({path: shot('stuck-overview.png'), fullPage: true});
        await click(page, '#ov-stuck-link');
        const L = (await call(base, 'GET', '/v1/clients?status=stuck&sort=id&order=asc&limit=20')).json;
        await waitText(page, '#cl-range', `1–${Math.min(20, L.total)} of ${L.total}`);
        eq(L.total, S.by_status.stuck, 'stuck clients listed by the API');
        eq(await page.$eval('#cl-status', s => s.value), 'stuck', 'the status filter');
        eq(JSON.stringify(await rowIds(page)), JSON.stringify(L.clients.map(c => c.id)), 'the stuck clients listed');
        const cells = await page.$$eval('#cl-table tbody td.status-stuck', tds => tds.map(t => t.textContent));
        eq(cells.length, L.clients.length, 'status cells shown as stuck');
        await page.screenshot({path: shot('stuck-clients.png'), fullPage: true});
        await click(page, `#cl-table tbody tr[data-id="${L.clients[0].id}"] a`);
        await waitText(page, '#c-status', 'stuck');
        await page.waitForSelector('#c-stuck-note');
        assert((await text(page, '#c-stuck-note')).includes('too-costly'), 'the client page names the round that refused it');
        await page.goto(base + '/?c=1#/clients', {waitUntil: 'load'}); /* a fresh state for the tests after */
    });

    await test('a warning banner while the ledger is read-only (a full disk), saying what to do', async () => {
        if (process.getuid && process.getuid() !== 0) {
            console.log('     skip: a full disk needs a tmpfs in a mount namespace of its own (root)');
            return;
        }
        const {base: fbase, dir} = await startFullDiskDaemon();
        for (const id of ['fa', 'fb']) {
            const r = await call(fbase, 'PUT', '/v1/clients/' + id, {budget: {epsilon: 100, delta: 1e-5}});
            eq(r.status, 201, 'PUT ' + id);
        }
        const ok = await call(fbase, 'POST', '/v1/rounds', {round_id: 'f1', participants: ['fa', 'fb'],
                                                           event: {class_name: 'GaussianDpEvent', noise_multiplier: 5}});
        eq(ok.status, 200, 'a round before the disk fills');
        const fpage = await newPage(ctx, log);
        await fpage.goto(fbase + '/?poll=400#/overview', {waitUntil: 'load'});
        await fpage.waitForSelector('#ov-clients');
        eq(await fpage.$eval('#warnings', w => w.hidden), true, 'the banner of a healthy daemon is hidden');
        fill(dir);
        const parts = ['fa'];
        for (let i = 0; i < 200; i++) parts.push('new-client-' + i);
        const r = await call(fbase, 'POST', '/v1/rounds', {round_id: 'f2', participants: parts,
                                                          event: {class_name: 'GaussianDpEvent', noise_multiplier: 7}});
        eq(r.status, 503, 'a round on a full disk: ' + r.text);
        const S = (await call(fbase, 'GET', '/v1/summary')).json;
        eq(S.read_only, true, 'the summary says read_only');
        await fpage.waitForSelector('#warnings p[data-cond="read_only"]', {timeout: WAIT});
        assert(!(await fpage.$eval('#warnings', w => w.hidden)), 'the banner is hidden');
        const msg = await text(fpage, '#warnings p[data-cond="read_only"]');
        assert(/read-only/.test(msg) && /restart/.test(msg) && /disk/.test(msg), 'the message: ' + msg);
        await waitText(fpage, '#ov-readonly', 'READ-ONLY (restart after fixing the disk)');
        await fpage.screenshot({path: shot('read-only.png'), fullPage: true});
        /* on every view, not only the overview */
        await fpage.goto(fbase + '/?poll=400#/client/fa', {waitUntil: 'load'});
        await fpage.waitForSelector('#warnings p[data-cond="read_only"]', {timeout: WAIT});
        await fpage.close();
    });

    await test('the banner says what to do when the ledger\'s database cannot be reached (readyz 503 ledger_unavailable)', async () => {
        /* a PostgreSQL outage needs a database: /readyz's answer during one is put in its
         * place here (the daemon's own problem body), everything else is the daemon's */
        const upage = await newPage(ctx, log);
        await upage.setRequestInterception(true);
        upage.on('request', req => {
            if (new URL(req.url()).pathname === '/readyz')
                req.respond({status: 503, contentType: 'application/problem+json', headers: {'Retry-After': '1'},
                             body: JSON.stringify({type: 'about:blank', title: 'The ledger\'s database cannot be reached: retry later',
                                                   status: 503, code: 'ledger_unavailable',
                                                   detail: 'the ledger\'s database does not answer'})}).catch(() => {});
            else req.continue().catch(() => {});
        });
        try {
            await upage.goto(base + '/?u=1#/clients', {waitUntil: 'load'});
            await upage.waitForSelector('#warnings p[data-cond="store_unavailable"]');
            const msg = await text(upage, '#warnings p[data-cond="store_unavailable"]');
            assert(/PostgreSQL/.test(msg) && /reconnects by itself/.test(msg), 'the message: ' + msg);
            await upage.screenshot({path: shot('store-unavailable.png'), fullPage: true});
        } finally {
            await upage.close();
        }
    });

    await test('the banner says the daemon is stopping (SIGTERM, readyz 503 shutting_down)', async () => {
        const sbase = await startDaemon('stopping', ['--shutdown-grace', '20']);
        const d = daemons[daemons.length - 1];
        const spage = await newPage(ctx, log);
        try {
            await spage.goto(sbase + '/?poll=400#/overview', {waitUntil: 'load'});
            await spage.waitForSelector('#ov-clients');
            eq(await spage.$eval('#warnings', w => w.hidden), true, 'the banner before the stop');
            d.kill('SIGTERM');
            await spage.waitForSelector('#warnings p[data-cond="shutting_down"]');
            assert(/another instance/.test(await text(spage, '#warnings p[data-cond="shutting_down"]')), 'the message');
        } finally {
            await spage.close();
            d.kill('SIGKILL');
        }
    });

    await test('no CSP violation or script error on any view', async () => {
        assert(log.length === 0, log.join(' | '));
    });

    /* keys: a fresh browser context (its own sessionStorage) against the daemon with keys */
    const kctx = await browser.createBrowserContext();
    const kpage = await newPage(kctx, log);
    const urls = [];
    kpage.on('request', r => urls.push(r.url()));

    await test('keys: a missing key is explained and the key field shown', async () => {
        await kpage.goto(kbase + '/', {waitUntil: 'load'});
        await kpage.waitForSelector('#auth-needed');
        assert(/needs an API key \(401\)/.test(await text(kpage, '#banner')), 'banner: ' + await text(kpage, '#banner'));
        assert(!(await kpage.$eval('#keyform', f => f.hidden)), 'the key field is hidden');
        await kpage.screenshot({path: shot('key-missing.png'), fullPage: true});
    });

    await test('keys: a wrong key is refused with a clear message', async () => {
        await kpage.type('#apikey', 'not-the-key');
        await kpage.click('#key-use');
        await kpage.waitForFunction(() => /not accepted \(401\)/.test(document.getElementById('banner').textContent),
                                    {timeout: WAIT});
    });

    await test('keys: the right key shows the overview; kept in sessionStorage, never in a URL', async () => {
        await kpage.type('#apikey', readTok);
        await kpage.click('#key-use');
        await kpage.waitForSelector('#ov-clients');
        const S = (await call(kbase, 'GET', '/v1/summary', undefined, readTok)).json;
        eq(await text(kpage, '#ov-clients'), String(S.clients), 'clients with a key');
        assert(await kpage.$eval('#banner', b => b.hidden), 'the banner is still shown');
        eq(await kpage.evaluate(() => sessionStorage.getItem('dpbudget.apiKey')), readTok, 'sessionStorage');
        eq(await kpage.evaluate(() => localStorage.length), 0, 'localStorage entries');
        for (const t of [readTok, 'not-the-key'])
            assert(!urls.some(u => u.includes(t)), 'a key appeared in a URL');
        await kpage.goto(kbase + '/#/clients', {waitUntil: 'load'});
        await kpage.waitForSelector('#cl-table');
        await clean(kpage, 'clients with a key');
        await kpage.screenshot({path: shot('key-accepted.png'), fullPage: true});
    });
}

main().catch(e => {
    failed++;
    console.log('FAIL setup: ' + (e && e.stack ? e.stack : e));
}).finally(async () => {
    clearTimeout(deadline);
    if (browser) await browser.close().catch(() => {});
    cleanup();
    console.log(`browser: screenshots in ${OUT}`);
    console.log(`browser: ${passed} passed, ${failed} failed`);
    process.exit(failed === 0 ? 0 : 1);
});
