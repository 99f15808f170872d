/*
 * app.js - the dpbudget dashboard. Plain JavaScript, no build step, no dependency: it runs as
 * served from the daemon; its numbers and SVG charts come from charts.js (loaded before it).
 * It uses the public API only (GET /v1/summary, /v1/history, /v1/clients, /v1/clients/{id},
 * /v1/clients/{id}/rounds, /readyz, /metrics and POST /v1/curve, /v1/calibrate). Reads are
 * polled with If-None-Match: a 304 keeps what is shown. Every chart over time is drawn from
 * the API's history, so a reload shows the same; the banner of warnings (#warnings) says what
 * the daemon's own conditions are and what the operator should do about each. The API key,
 * when the daemon asks for one, lives in sessionStorage (this tab only) and is sent as
 * 'Authorization: Bearer'; it is never put in a URL.
 */
'use strict';

(function () {
    const KEY_STORE = 'dpbudget.apiKey';
    const {fmt, fmtInt, fmtBytes, fmtSeconds, fmtDuration, fmtPct, s, niceTicks, barChart, lineChart,
           timeTicks} = window.dpbudgetCharts; /* charts.js */
    const pollParam = Number(new URLSearchParams(location.search).get('poll'));
    const POLL_MS = pollParam >= 200 && pollParam <= 600000 ? pollParam : 5000;

    const state = {
        key: sessionStorage.getItem(KEY_STORE) || '',
        cache: new Map(), /* url -> {etag, data} */
        timer: null,
        generation: 0, /* bumps on every refresh (navigation, action, poll): an answer to an
                        * older one is dropped, so a late answer never replaces a newer view */
        inflight: 0, /* when the refresh awaiting its answer started (0: none): polls wait */
        clients: {q: '', status: '', sort: 'id', order: 'asc', limit: 20, cursors: [null]},
        readOnlyHeader: false, /* the last ledger read carried Ledger-Read-Only: true */
    };

    /* the spent fraction of a client (spent ε / budget ε; shown as a percentage rounded up) */
    function fraction(c) {
        const b = c.budget && c.budget.epsilon, s = c.spent && c.spent.epsilon;
        if (typeof b !== 'number' || typeof s !== 'number' || b <= 0) return null;
        return s / b;
    }

    /* ---- DOM helpers (textContent only: ids and labels are data, never markup) -------------- */

    function h(tag, attrs, ...kids) {
        const el = document.createElement(tag);
        for (const [k, v] of Object.entries(attrs || {})) {
            if (v === undefined || v === null || v === false) continue;
            if (k === 'class') el.className = v;
            else if (k === 'text') el.textContent = v;
            else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
            else el.setAttribute(k, v === true ? '' : String(v));
        }
        for (const kid of kids.flat()) {
            if (kid === null || kid === undefined || kid === false) continue;
            el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
        }
        return el;
    }

    /* a number shown rounded, with the API's exact value in data-raw */
    function num(id, raw, text, cls) {
        return h('span', {id: id, class: cls, 'data-raw': raw === null || raw === undefined ? '' : String(raw),
                          text: text});
    }

    function card(key, id, raw, text, cls) {
        return h('div', {class: 'card'}, h('div', {class: 'k', text: key}),
                 h('div', {class: 'v ' + (cls || '')}, num(id, raw, text)));
    }

    /* ---- the API ---------------------------------------------------------------------------- */

    class ApiError extends Error {
        constructor(status, problem) {
            super((problem && (problem.detail || problem.title)) || 'HTTP ' + status);
            this.status = status;
            this.problem = problem || {};
        }
    }

    function banner(msg) {
        const b = document.getElementById('banner');
        b.textContent = msg || '';
        b.hidden = !msg;
    }

    function showKeyForm(show) {
        document.getElementById('keyform').hidden = !show;
    }

    function authMessage(status, problem) {
        if (status === 401)
            return state.key
                ? 'The API key was not accepted (401): check it and enter it again above.'
                : 'This daemon needs an API key (401): enter a key with the read scope above. ' +
                  'It is kept for this browser tab only.';
        if (status === 403)
            return 'The API key lacks the scope this view needs (403): ' +
                   (problem.detail || 'use a key with the read scope') + '.';
        return 'Too many requests for this key (429): the dashboard retries at the next refresh.';
    }

    /* fetch JSON (or text with opts.text). GETs are conditional: a 304 answers from the cache. */
    async function api(path, opts) {
        opts = opts || {};
        const method = opts.method || 'GET';
        const headers = {Accept: opts.text ? 'text/plain' : 'application/json'};
        if (state.key) headers.Authorization = 'Bearer ' + state.key;
        const cached = method === 'GET' ? state.cache.get(path) : undefined;
        if (cached && cached.etag) headers['If-None-Match'] = cached.etag;
        let body;
        if (opts.body !== undefined) {
            headers['Content-Type'] = 'application/json';
            body = JSON.stringify(opts.body);
        }
        const r = await fetch(path, {method, headers, body, cache: 'no-store',
                                     credentials: 'omit'});
        if (/^\/v1\//.test(path) && method === 'GET' && r.status !== 401 && r.status !== 403 &&
            r.status !== 429)
            state.readOnlyHeader = (r.headers.get('Ledger-Read-Only') || '').toLowerCase() === 'true';
        if (r.status === 304 && cached) return {data: cached.data, notModified: true};
        if (opts.text && r.ok) return {data: await r.text()};
        let data = null;
        try { data = await r.json(); } catch (e) { data = null; }
        if (r.status === 401 || r.status === 403 || r.status === 429) {
            showKeyForm(true);
            banner(authMessage(r.status, data || {}));
            throw new ApiError(r.status, data);
        }
        if (!r.ok) throw new ApiError(r.status, data);
        const etag = r.headers.get('ETag');
        if (method === 'GET' && etag) {
            state.cache.delete(path);
            state.cache.set(path, {etag, data});
            /* bounded: history paths change with the time, so the oldest entries go */
            while (state.cache.size > 64) state.cache.delete(state.cache.keys().next().value);
        }
        return {data};
    }

    /* The Prometheus text exposition: name{labels} -> value (no timestamps are sent). */
    function parseMetrics(text) {
        const out = [];
        for (const line of text.split('\n')) {
            if (!line || line[0] === '#') continue;
            const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$/.exec(line);
            if (!m) continue;
            const labels = {};
            if (m[3]) for (const kv of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
                labels[kv[1]] = kv[2];
            out.push({name: m[1], labels, value: Number(m[4])});
        }
        return out;
    }

    function metricSum(ms, name, pred) {
        return ms.filter(m => m.name === name && (!pred || pred(m.labels)))
                 .reduce((a, m) => a + m.value, 0);
    }

    /* ---- views ------------------------------------------------------------------------------ */

    const view = () => document.getElementById('view');

    /* replace the view's content (null and false parts are left out) */
    function show(...kids) {
        view().replaceChildren(...kids.flat().filter(k => k !== null && k !== undefined && k !== false));
    }

    function stamp(notModified) {
        document.getElementById('updated').textContent =
            (notModified ? 'unchanged at ' : 'updated at ') + new Date().toLocaleTimeString('en-GB');
    }

    function failed(e) {
        if (e instanceof ApiError && (e.status === 401 || e.status === 403 || e.status === 429)) {
            show(h('p', {class: 'note', id: 'auth-needed',
                         text: 'Nothing to show until the API accepts the key (see above).'}));
            return;
        }
        banner(e instanceof ApiError ? `The daemon answered ${e.status}: ${e.message}`
                                     : 'The daemon cannot be reached: ' + e.message);
    }

    /* ---- history: the ledger's series over time (GET /v1/history) -------------------------- */

    /* each resolution: its bucket, the span the overview shows, how its times are written */
    const RESOLUTIONS = {
        minute: {ms: 60e3, span: 3 * 3600e3, word: 'minute', fmt: d => d.toISOString().slice(11, 16)},
        hour: {ms: 3600e3, span: 7 * 86400e3, word: 'hour',
               fmt: d => d.toISOString().slice(5, 10) + ' ' + d.toISOString().slice(11, 16)},
        day: {ms: 86400e3, span: 365 * 86400e3, word: 'day', fmt: d => d.toISOString().slice(0, 10)},
    };
    const STATUSES = ['active', 'exhausted', 'uncertified', 'stuck'];

    /* the history of the last span ms at resolution res; from is rounded down to the bucket,
     * so the path (and its ETag) stays the same within a bucket */
    function historyFrom(res, span) {
        const R = RESOLUTIONS[res];
        return new Date(Math.floor((Date.now() - span) / R.ms) * R.ms).toISOString();
    }

    function historyPath(res, from) {
        return `/v1/history?resolution=${res}&from=${encodeURIComponent(from)}`;
    }

    /* the API's points as series over time (x: ms since the epoch, UTC), from the bucket of
     * from (the one asked for), or at most 30 buckets before the first point, to now. The API
     * answers every bucket from the first with a record to the newest: buckets it leaves out
     * had no record, so their counts are 0; the clients by status are those at the end of the
     * bucket before (unknown, so not drawn, before the first point). */
    function historySeries(H, res, from) {
        const R = RESOLUTIONS[res], byStart = new Map();
        for (const p of H.points || []) byStart.set(Math.floor(Date.parse(p.start) / R.ms) * R.ms, p);
        const starts = [...byStart.keys()].sort((a, b) => a - b);
        const last = Math.floor(Date.now() / R.ms) * R.ms;
        const first = starts.length ? starts[0] : last;
        const t0 = Math.max(Math.floor(Date.parse(from) / R.ms) * R.ms, Math.min(first, last - 30 * R.ms));
        const t1 = Math.max(last, starts.length ? starts[starts.length - 1] : last);
        const out = {t: [], rounds: [], charges: [], eps: [], refusals: new Map(), status: {}};
        for (const k of STATUSES) out.status[k] = [];
        const reasons = new Set();
        for (const p of H.points || []) for (const r of Object.keys(p.refusals || {})) reasons.add(r);
        for (const r of [...reasons].sort()) out.refusals.set(r, []);
        let st = null;
        for (let t = t0, n = 0; t <= t1 && n < 5000; t += R.ms, n++) {
            const p = byStart.get(t);
            if (p && p.by_status) st = p.by_status;
            out.t.push(t);
            out.rounds.push([t, p ? p.rounds || 0 : 0]);
            out.charges.push([t, p ? p.charges || 0 : 0]);
            out.eps.push([t, p ? p.epsilon_spent || 0 : 0]);
            for (const [r, pts] of out.refusals) pts.push([t, p && p.refusals ? p.refusals[r] || 0 : 0]);
            for (const k of STATUSES) out.status[k].push([t, st && typeof st[k] === 'number' ? st[k] : null]);
        }
        return out;
    }

    /* hs: historySeries' answer (every chart of it spans the same buckets) */
    function timeChart(hs, series, id, res, o) {
        const R = RESOLUTIONS[res];
        return lineChart(series, Object.assign({id, xTicks: timeTicks, xFmt: v => R.fmt(new Date(v)),
                                                xMin: hs.t[0], xMax: hs.t[hs.t.length - 1],
                                                xLabel: `time (UTC), per ${R.word}`, yMin: 0,
                                                empty: 'no rounds in this span'}, o || {}));
    }

    /* clients that became exhausted in the hour before now, from a minute-resolution history
     * (every bucket from the first with a record on, each with the clients by status at its
     * end): the count now minus the count at the end of the last bucket that ended an hour ago
     * or earlier. When the history starts within the hour, the count before it is 0 only if
     * the history holds all the ledger's rounds (S.rounds: none was made before the ledger
     * kept times); otherwise it is unknown and null is answered (no rate is claimed). */
    function exhaustedLastHour(H, S, now) {
        const pts = (H.points || []).filter(p => p.by_status && typeof p.by_status.exhausted === 'number')
                                    .map(p => [Date.parse(p.start), p.by_status.exhausted, p.rounds || 0])
                                    .sort((a, b) => a[0] - b[0]);
        if (!pts.length) return 0;
        const before = pts.filter(p => p[0] + 60e3 <= now - 3600e3);
        let base;
        if (before.length) base = before[before.length - 1][1];
        else if (pts.reduce((a, p) => a + p[2], 0) >= S.rounds) base = 0;
        else return null;
        return pts[pts.length - 1][1] - base;
    }

    /* ---- the daemon's own conditions: the banner of warnings ------------------------------- */

    /* more than this fraction of all clients exhausted within an hour is a warning (the
     * threshold of the DpbudgetClientsExhaustingFast alert in deploy/monitoring/alerts.yml) */
    const EXHAUST_FRACTION_PER_HOUR = 0.1;

    function warningsOf(S, ready, H) {
        const w = [];
        const rcode = ready && ready.status === 503 && ready.body ? ready.body.code : null;
        if ((S && S.read_only) || state.readOnlyHeader || rcode === 'read_only')
            w.push({cond: 'read_only', critical: true, title: 'The ledger is read-only.',
                    text: 'An I/O failure (a full or failing disk under the data directory) stopped ' +
                          'its writes: every round and budget change is refused with 503 read_only, ' +
                          'reads still answer, and GET /readyz takes this instance out of service. ' +
                          'Free space on or repair the disk, then restart the daemon: every ' +
                          'acknowledged charge is in the log and is replayed.'});
        if (rcode === 'ledger_unavailable')
            w.push({cond: 'store_unavailable', critical: true, title: 'The ledger\'s database cannot be reached.',
                    text: 'GET /readyz answers 503 ledger_unavailable: rounds and ledger reads are ' +
                          'refused until the database answers. Check the PostgreSQL server and the ' +
                          'network to it (--ledger-url); the daemon reconnects by itself, and callers ' +
                          'may retry a round with the same round id.'});
        else if (rcode === 'shutting_down')
            w.push({cond: 'shutting_down', critical: true, title: 'The daemon is stopping.',
                    text: 'GET /readyz answers 503 shutting_down: it serves for --shutdown-grace ' +
                          'seconds more. Route traffic to another instance, or start it again.'});
        else if (ready && ready.status === 503 && rcode !== 'read_only')
            w.push({cond: 'not_ready', critical: true, title: 'The daemon is not ready.',
                    text: `GET /readyz answers 503 ${rcode || ''}: ` +
                          ((ready.body && ready.body.detail) || 'see the daemon\'s log') + '.'});
        if (S && H) {
            const n = exhaustedLastHour(H, S, Date.now());
            if (n !== null && n >= 1 && n > EXHAUST_FRACTION_PER_HOUR * S.clients)
                w.push({cond: 'exhausting_fast', title: 'Clients are exhausting their budgets fast.',
                        data: n,
                        text: `${fmtInt(n)} of ${fmtInt(S.clients)} clients became exhausted in the ` +
                              `last hour, more than ${EXHAUST_FRACTION_PER_HOUR * 100} %: check the ` +
                              'rounds being charged (their noise multiplier, how often they run, a ' +
                              'caller retrying with new round ids) before more budgets run out.',
                        link: ['#/clients?status=exhausted', 'the exhausted clients']});
        }
        const stuck = S && S.by_status ? S.by_status.stuck : 0;
        if (stuck > 0)
            w.push({cond: 'stuck', title: `${fmtInt(stuck)} ${stuck === 1 ? 'client is' : 'clients are'} stuck.`,
                    data: stuck,
                    text: 'The latest round that tested each one\'s budget refused it for lack of ' +
                          'budget, and nothing since gave it room: rounds like it will keep refusing ' +
                          'them. Give them more budget (PUT /v1/clients/{id}), offer them cheaper ' +
                          'rounds, or pick each round\'s participants with POST /v1/eligibility.',
                    link: ['#/clients?status=stuck', 'the stuck clients']});
        return w;
    }

    function showWarnings(list) {
        const el = document.getElementById('warnings');
        el.replaceChildren(...list.map(x => h('p', {class: 'warn-item' + (x.critical ? ' critical' : ''),
                                                   'data-cond': x.cond, 'data-raw': x.data},
            h('b', {text: x.title}), x.text,
            x.link ? [' ', h('a', {href: x.link[0], text: 'Show ' + x.link[1] + '.'})] : null)));
        el.hidden = list.length === 0;
    }

    /* the daemon's conditions, checked beside every view: the summary, readiness and the last
     * two hours of history; what cannot be read (no key yet) is left to the view to explain */
    async function conditions(gen) {
        let S = null, ready = null, H = null;
        const sumP = api('/v1/summary').then(r => { S = r.data; }, () => {});
        const histP = api(historyPath('minute', historyFrom('minute', 2 * 3600e3))).then(r => { H = r.data; }, () => {});
        const readyP = fetch('/readyz', {cache: 'no-store', credentials: 'omit'})
            .then(async r => { ready = {status: r.status, body: await r.json().catch(() => null)}; }, () => {});
        await Promise.all([sumP, histP, readyP]);
        if (gen !== state.generation) return;
        showWarnings(warningsOf(S, ready, H));
    }

    /* overview: clients by status (stuck ones linked), the spent-fraction distribution, the
     * ledger's history at a chosen resolution (rounds, ε spent, refusals by reason, clients by
     * status over time), ledger health */
    async function overview(gen, query) {
        const res = RESOLUTIONS[query.get('res')] ? query.get('res') : 'minute';
        const R = RESOLUTIONS[res], from = historyFrom(res, R.span);
        /* the history may fail alone (an auth failure is thrown by the summary too): the rest
         * of the overview is shown, with the history's error in its place */
        const [sum, met, hist] = await Promise.all([api('/v1/summary'), api('/metrics', {text: true}),
                                                   api(historyPath(res, from)).catch(e => ({error: e}))]);
        if (gen !== state.generation) return;
        const S = sum.data, M = parseMetrics(met.data), H = hist.data || {points: []};
        banner('');
        const refusals = metricSum(M, 'dpbudget_round_refusals_total');
        const fsCount = metricSum(M, 'dpbudget_wal_fsync_seconds_count');
        const fsSum = metricSum(M, 'dpbudget_wal_fsync_seconds_sum');
        const buckets = M.filter(m => m.name === 'dpbudget_wal_fsync_seconds_bucket' && m.labels.le !== '+Inf')
                         .map(m => [Number(m.labels.le), m.value]).sort((a, b) => a[0] - b[0]);
        const p99 = fsCount > 0 ? (buckets.find(b => b[1] >= 0.99 * fsCount) || [Infinity])[0] : null;
        const st = S.by_status || {};
        const ro = !!S.read_only;
        const hs = historySeries(H, res, from);
        const hist10 = (S.spent_fraction_histogram || []).map(b => ({
            label: b.to === 'infinite' ? '≥ 100' : fmt(b.from * 100),
            value: b.clients, cls: b.to === 'infinite' ? 'full' : '',
            attrs: {'data-from': b.from}}));
        const resSelect = h('select', {id: 'ov-res', onchange: ev => {
            location.hash = '#/overview?res=' + ev.target.value; }},
            Object.keys(RESOLUTIONS).map(k => h('option', {value: k, selected: k === res, text: 'per ' + k})));
        const stuckCard = h('a', {class: 'card', id: 'ov-stuck-link', href: '#/clients?status=stuck',
                                  title: 'list the stuck clients'},
                            h('div', {class: 'k', text: 'stuck (list them)'}),
                            h('div', {class: 'v status-stuck'}, num('ov-stuck', st.stuck, fmtInt(st.stuck))));
        const when = t => (typeof t === 'string' ? t.slice(0, 16).replace('T', ' ') : '—');
        const retention = Object.entries(H.retention || {}).map(([k, v]) =>
            `per ${k}, the last ${fmtInt(v.buckets)} buckets of ${fmtDuration(v.bucket_seconds)}` +
            (v.from && v.to && Date.parse(v.to) > 0 ? ` (now ${when(v.from)} to ${when(v.to)} UTC)` : '')).join('; ');
        show(
            h('h2', {text: 'Overview'}),
            h('div', {class: 'grid'},
              card('clients', 'ov-clients', S.clients, fmtInt(S.clients)),
              card('active', 'ov-active', st.active, fmtInt(st.active), 'status-active'),
              card('exhausted', 'ov-exhausted', st.exhausted, fmtInt(st.exhausted), 'status-exhausted'),
              card('uncertified', 'ov-uncertified', st.uncertified, fmtInt(st.uncertified),
                   'status-uncertified'),
              stuckCard,
              card('rounds in the ledger', 'ov-rounds', S.rounds, fmtInt(S.rounds)),
              card('refusals since start', 'ov-refusals', refusals, fmtInt(refusals))),
            h('h3', {text: 'Ledger health'}),
            h('div', {class: 'grid'},
              card('writes', 'ov-readonly', ro ? 1 : 0,
                   ro ? 'READ-ONLY (restart after fixing the disk)' : 'accepted',
                   'small ' + (ro ? 'bad' : 'ok')),
              card('log size', 'ov-logbytes', S.log_bytes, fmtBytes(S.log_bytes)),
              card('fsync, mean', 'ov-fsync-mean', fsCount ? fsSum / fsCount : null,
                   fsCount ? fmtSeconds(fsSum / fsCount) : 'no syncs yet'),
              card('fsync, 99 % at most', 'ov-fsync-p99', p99,
                   p99 === null ? '—' : p99 === Infinity ? '> 5 s' : fmtSeconds(p99)),
              card('fsyncs', 'ov-fsync-count', fsCount, fmtInt(fsCount))),
            h('div', {class: 'panels'},
              h('div', {class: 'panel'}, h('h3', {text: 'Clients by status'}),
                barChart(STATUSES.map(k => ({label: k, value: st[k] || 0, cls: k})),
                         {id: 'chart-status', title: 'clients by status', height: 200})),
              h('div', {class: 'panel'}, h('h3', {text: 'Spent fraction of the ε budget'}),
                barChart(hist10, {id: 'chart-spent', title: 'clients by spent fraction',
                                  xLabel: '% of the ε budget spent (bins of 10 %, labelled by their start)'}),
                h('p', {class: 'note', text: 'The last bin holds clients at or past their budget.'}))),
            h('div', {class: 'controls'}, h('h3', {text: 'Over time'}),
              h('label', {}, 'resolution', resSelect)),
            hist.error ? h('p', {class: 'err', id: 'ov-history-err', text: 'The history cannot be shown: ' +
                                 problemText(hist.error)}) :
            h('div', {class: 'panels', id: 'ov-history', 'data-resolution': res, 'data-points': (H.points || []).length},
              h('div', {class: 'panel'}, h('h3', {text: `Rounds and charges per ${R.word}`}),
                timeChart(hs, [{name: 'rounds', points: hs.rounds}, {name: 'charges (clients charged)', points: hs.charges}],
                          'chart-hist-rounds', res, {yFmt: v => fmtInt(Math.round(v))})),
              h('div', {class: 'panel'}, h('h3', {text: `ε spent per ${R.word}`}),
                timeChart(hs, [{name: 'ε upper-bound increases, summed over the charges', points: hs.eps}], 'chart-hist-eps', res),
                h('p', {class: 'note', id: 'ov-eps-note', 'data-raw': H.epsilon_spent_is, text:
                        `A load figure (${H.epsilon_spent_is || 'sum_of_upper_bound_increases'}), not a privacy ` +
                        'guarantee of anything: each charge adds the rise of its client\'s ε upper bound as the ' +
                        'round\'s admission computed it; a later tightening (pld refinement) is not subtracted, ' +
                        'and an uncertifiable charge (no finite bound) is left out and shows as a status.'})),
              h('div', {class: 'panel'}, h('h3', {text: `Refusals per ${R.word}, by reason`}),
                timeChart(hs, [...hs.refusals].map(([r, pts]) => ({name: r, points: pts})), 'chart-hist-refusals', res,
                          {yFmt: v => fmtInt(Math.round(v)), empty: 'no refusals in this span'})),
              h('div', {class: 'panel'}, h('h3', {text: 'Clients by status over time'}),
                timeChart(hs, STATUSES.map(k => ({name: k, points: hs.status[k], cls: 'st-' + k})), 'chart-hist-status', res,
                          {yFmt: v => fmtInt(Math.round(v))}))),
            hist.error ? null : h('p', {class: 'note', id: 'ov-history-note', 'data-from': from, text:
                `From GET /v1/history (per ${R.word}, since ${from.slice(0, 16).replace('T', ' ')} UTC), ` +
                'so a reload shows the same. Records written before the ledger kept times have ' +
                'none and are not placed in time.' + (retention ? ' The daemon keeps: ' + retention + '.' : '')}));
        stamp(sum.notModified && hist.notModified);
    }

    function clientRow(c) {
        const f = fraction(c);
        const bar = s('svg', {class: 'fraction', width: 80, height: 10, viewBox: '0 0 80 10'},
                      s('rect', {x: 0, y: 0, width: 80, height: 10, fill: '#eceef2'}),
                      s('rect', {x: 0, y: 0, width: Math.min(80, 80 * (f || 0)), height: 10,
                                 class: 'bar ' + (f >= 1 ? 'full' : '')}));
        const labels = Object.entries(c.labels || {}).map(([k, v]) => h('span', {class: 'badge', text: `${k}=${v}`}));
        return h('tr', {class: 'row', 'data-id': c.id,
                        onclick: () => { location.hash = '#/client/' + encodeURIComponent(c.id); }},
                 h('td', {}, h('a', {href: '#/client/' + encodeURIComponent(c.id), text: c.id})),
                 h('td', {}, labels),
                 h('td', {class: 'status-' + c.status, text: c.status}),
                 h('td', {class: 'num'}, num(null, c.budget.epsilon, fmt(c.budget.epsilon, 'near'))),
                 h('td', {class: 'num'}, num(null, c.spent.epsilon, fmt(c.spent.epsilon, 'up'), 'spent')),
                 h('td', {class: 'num'}, num(null, c.remaining.epsilon, fmt(c.remaining.epsilon, 'down'))),
                 h('td', {class: 'num'}, bar, ' ', num(null, f, fmtPct(f), 'frac')),
                 h('td', {class: 'num', text: fmtInt(c.rounds)}));
    }

    function clientsQuery() {
        const c = state.clients, p = new URLSearchParams();
        if (c.q.includes('=')) p.set('label', c.q);
        if (c.status) p.set('status', c.status);
        p.set('sort', c.sort);
        p.set('order', c.order);
        p.set('limit', String(c.limit));
        const cur = c.cursors[c.cursors.length - 1];
        if (cur) p.set('cursor', cur);
        return '/v1/clients?' + p.toString();
    }

    let clientsControls = null;

    function buildClientsControls() {
        const c = state.clients;
        const reset = () => { c.cursors = [null]; refresh(true); };
        const search = h('input', {id: 'cl-search', type: 'search', value: c.q, size: 28,
                                   placeholder: 'client id, or label key=value'});
        const go = h('form', {class: 'controls', onsubmit: ev => {
            ev.preventDefault(); c.q = search.value.trim(); reset(); }},
            h('label', {}, 'search', search),
            h('button', {type: 'submit', id: 'cl-go', text: 'Search'}),
            h('button', {type: 'button', class: 'plain', id: 'cl-clear', text: 'Clear',
                         onclick: () => { search.value = ''; c.q = ''; reset(); }}),
            h('label', {}, 'status', h('select', {id: 'cl-status', onchange: ev => { c.status = ev.target.value; reset(); }},
              ['', 'active', 'exhausted', 'uncertified', 'stuck'].map(v => h('option', {value: v, selected: v === c.status,
                                                                               text: v || 'any'})))),
            h('label', {}, 'sort by', h('select', {id: 'cl-sort', onchange: ev => { c.sort = ev.target.value; reset(); }},
              [['id', 'id'], ['spent', 'spent ε'], ['remaining', 'remaining ε']].map(
                  ([v, t]) => h('option', {value: v, selected: v === c.sort, text: t})))),
            h('label', {}, 'order', h('select', {id: 'cl-order', onchange: ev => { c.order = ev.target.value; reset(); }},
              [['asc', 'ascending'], ['desc', 'descending']].map(
                  ([v, t]) => h('option', {value: v, selected: v === c.order, text: t})))),
            h('label', {}, 'per page', h('select', {id: 'cl-limit', onchange: ev => { c.limit = Number(ev.target.value); reset(); }},
              [10, 20, 50, 100].map(v => h('option', {value: v, selected: v === c.limit, text: String(v)})))));
        return go;
    }

    async function clients(gen, force) {
        const c = state.clients;
        let rows, total, next = null, note = '';
        if (c.q && !c.q.includes('=')) {
            /* an id: the API looks clients up by exact id */
            try {
                const r = await api('/v1/clients/' + encodeURIComponent(c.q));
                rows = [r.data];
            } catch (e) {
                if (!(e instanceof ApiError) || e.status !== 404) throw e;
                rows = [];
            }
            total = rows.length;
            note = 'Searching by id matches the whole id exactly; search key=value for a label.';
        } else {
            const r = await api(clientsQuery());
            if (r.notModified && !force && document.getElementById('cl-table')) {
                stamp(true);
                return;
            }
            rows = r.data.clients;
            total = r.data.total;
            next = r.data.next_cursor;
            note = c.q ? `Clients with the label ${c.q}.` : '';
        }
        if (gen !== state.generation) return;
        banner('');
        const page = c.cursors.length - 1;
        const first = total === 0 ? 0 : page * c.limit + 1;
        const last = page * c.limit + rows.length;
        if (!clientsControls || !document.body.contains(clientsControls))
            clientsControls = buildClientsControls();
        const table = h('table', {id: 'cl-table'},
            h('thead', {}, h('tr', {},
              h('th', {text: 'id'}), h('th', {text: 'labels'}), h('th', {text: 'status'}),
              h('th', {class: 'num', text: 'budget ε'}), h('th', {class: 'num', text: 'spent ε'}),
              h('th', {class: 'num', text: 'remaining ε'}), h('th', {class: 'num', text: 'spent fraction'}),
              h('th', {class: 'num', text: 'rounds'}))),
            h('tbody', {}, rows.map(clientRow)));
        const pager = h('div', {class: 'pager'},
            h('button', {class: 'plain', id: 'cl-prev', text: '← previous', disabled: page === 0,
                         onclick: () => { c.cursors.pop(); refresh(true); }}),
            h('span', {id: 'cl-range', 'data-total': total,
                       text: total === 0 ? 'no clients match' : `${fmtInt(first)}–${fmtInt(last)} of ${fmtInt(total)}`}),
            h('button', {class: 'plain', id: 'cl-next', text: 'next →', disabled: !next,
                         onclick: () => { c.cursors.push(next); refresh(true); }}));
        show(h('h2', {text: 'Clients'}), clientsControls,
                               note ? h('p', {class: 'note', id: 'cl-note', text: note}) : null,
                               table, pager,
                               h('p', {class: 'note', text: 'Spent fractions are spent ε / budget ε, ' +
                                       'rounded up; remaining ε is rounded down.'}));
        stamp(false);
    }

    /* a client's charge history (GET /v1/clients/{id}/rounds, newest first) as its spend over
     * its charged rounds, oldest first (x: the round's place; its time is in the table below) */
    function clientHistory(c, Hc) {
        const rows = (Hc.charges || []).slice().sort((a, b) => a.seq - b.seq);
        const charged = rows.filter(x => x.state === 'charged' && typeof x.spent_after === 'number');
        const pts = charged.map((x, i) => [i + 1, x.spent_after]);
        const untimed = rows.some(x => typeof x.time !== 'string');
        const xOpts = {xFmt: v => (Math.abs(v - Math.round(v)) < 1e-9 ? fmtInt(Math.round(v)) : ''),
                       xTicks: (x0, x1) => niceTicks(x0, x1, Math.min(5, Math.max(1, x1 - x0))).filter(Number.isInteger),
                       xLabel: 'its charged rounds, oldest first (their times are in the table)'};
        const note = (Hc.complete ? `All ${fmtInt(Hc.total)} rounds that charged or reserved this client.`
                                  : `The newest ${fmtInt(Hc.total)} rounds that charged or reserved this client: ` +
                                    `the ledger keeps ${fmtInt(Hc.history_limit)} per client, older ones ` +
                                    'count in the totals above but are not listed.') +
                     (untimed ? ' Rounds recorded before the ledger kept times show no time.' : '') +
                     ' Spent ε is the spend the round\'s admission named (rounded up).';
        return [
            h('p', {class: 'note', id: 'c-history-note', text: note}),
            pts.length ? lineChart([{name: 'spent ε after the round', points: pts},
                                    {name: 'budget ε', dashed: true, cls: 'st-exhausted',
                                     points: [[1, c.budget.epsilon], [Math.max(2, pts.length), c.budget.epsilon]]}],
                                   Object.assign({id: 'chart-client', yMin: 0}, xOpts))
                       : h('p', {class: 'note', id: 'c-history-empty', text: 'No round has charged this client yet.'}),
            rows.length ? h('table', {id: 'c-history-table'},
                h('thead', {}, h('tr', {}, h('th', {text: 'round'}), h('th', {text: 'time (UTC)'}),
                                 h('th', {text: 'state'}), h('th', {class: 'num', text: 'spent ε after'}))),
                h('tbody', {}, rows.slice().reverse().map(x => h('tr', {'data-round': x.round_id, 'data-seq': x.seq},
                  h('td', {text: x.round_id}),
                  h('td', {text: typeof x.time === 'string' ? x.time.replace('T', ' ').replace('Z', '') : 'not recorded'}),
                  h('td', {text: x.state}),
                  h('td', {class: 'num'}, typeof x.spent_after === 'number'
                      ? num(null, x.spent_after, fmt(x.spent_after, 'up'), 'c-spent-after')
                      : h('span', {text: 'summarized'})))))) : null];
    }

    async function client(gen, id, force) {
        const enc = encodeURIComponent(id);
        const [r, rh] = await Promise.all([api('/v1/clients/' + enc), api('/v1/clients/' + enc + '/rounds?limit=1000')]);
        if (gen !== state.generation) return;
        if (r.notModified && rh.notModified && !force && document.getElementById('c-id')) {
            stamp(true);
            return;
        }
        banner('');
        const c = r.data, f = fraction(c);
        show(
            h('h2', {}, 'Client ', h('span', {id: 'c-id', text: c.id}), ' ',
              h('span', {id: 'c-status', class: 'badge status-' + c.status, text: c.status})),
            c.status === 'stuck' ? h('p', {class: 'status-stuck', id: 'c-stuck-note', text:
                'Stuck: the latest round that tested this client\'s budget (' + (c.stuck_round || 'see its ' +
                'history') + ') refused it for lack of budget, and nothing since gave it room: rounds like ' +
                'it will keep refusing it. Give it more budget or offer it cheaper rounds.'}) : null,
            h('div', {class: 'grid'},
              card('budget ε', 'c-budget-eps', c.budget.epsilon, fmt(c.budget.epsilon, 'near')),
              card('budget δ', 'c-budget-delta', c.budget.delta, fmt(c.budget.delta, 'near')),
              card('spent ε', 'c-spent', c.spent.epsilon, fmt(c.spent.epsilon, 'up')),
              card('remaining ε', 'c-remaining', c.remaining.epsilon, fmt(c.remaining.epsilon, 'down')),
              card('spent fraction', 'c-fraction', f, fmtPct(f)),
              card('rounds charged', 'c-rounds', c.rounds, fmtInt(c.rounds)),
              card('total-variation δ spent', 'c-delta-tv', c.spent.delta_total_variation,
                   fmt(c.spent.delta_total_variation, 'up'))),
            h('p', {}, 'Accounting: ', h('b', {text: c.accounting}), ' · guarantee: ',
              h('b', {id: 'c-guarantee', title: c.guarantee_reference || '', text: c.guarantee_kind}),
              ' · relation: ',
              h('b', {text: c.neighboring_relation}), ' · labels: ',
              Object.entries(c.labels || {}).map(([k, v]) => h('span', {class: 'badge', text: `${k}=${v}`})),
              ' · version ', h('span', {text: String(c.version)})),
            h('div', {class: 'panel'},
              h('h3', {text: 'ε spent over its rounds'}),
              clientHistory(c, rh.data)),
            h('p', {}, h('a', {href: '#/clients', text: '← all clients'})));
        stamp(r.notModified && rh.notModified);
    }

    /* compute: delta(eps) and trade-off curves of an event, a calibration form, Theorem 4.1
     * beside the exact shuffled accountant */
    function eventFields(prefix, withRounds) {
        const cls = h('select', {id: prefix + '-class'},
            h('option', {value: 'ShuffledDpSgdEpochDpEvent', text: 'shuffled DP-SGD epoch'}),
            h('option', {value: 'GaussianDpEvent', text: 'Gaussian'}));
        const sigma = h('input', {id: prefix + '-sigma', type: 'number', step: 'any', min: 0, value: '1', size: 8});
        const rounds = h('input', {id: prefix + '-rounds', type: 'number', step: 1, min: 1, value: '10000', size: 10});
        const acct = h('select', {id: prefix + '-acct'},
            ['auto', 'shuffle_exact', 'thm41', 'pld', 'rdp', 'gdp_exact'].map(v => h('option', {value: v, text: v})));
        const labels = [h('label', {}, 'event', cls), h('label', {}, 'noise multiplier σ', sigma)];
        if (withRounds) labels.push(h('label', {}, 'rounds M (shuffled)', rounds));
        labels.push(h('label', {}, 'accountant', acct));
        const event = () => {
            const e = {class_name: cls.value, noise_multiplier: Number(sigma.value)};
            if (withRounds && cls.value === 'ShuffledDpSgdEpochDpEvent') e.rounds = Number(rounds.value);
            return e;
        };
        return {labels, event, acct, cls};
    }

    function problemText(e) {
        if (!(e instanceof ApiError)) return 'The request failed: ' + e.message;
        const p = e.problem || {};
        const conds = (p.conditions || []).filter(c => !c.holds).map(c => c.statement || c.name);
        return `${e.status} ${p.code || ''}: ${p.detail || e.message}` +
               (conds.length ? ' (conditions not met: ' + conds.join('; ') + ')' : '');
    }

    function compute() {
        const cf = eventFields('cv', true);
        const epsMax = h('input', {id: 'cv-epsmax', type: 'number', step: 'any', min: 0.1, value: '4', size: 6});
        const curveOut = h('div', {class: 'result', id: 'cv-out'});
        /* each form shows the answer to its latest submission only: an older, slower answer
         * arriving after it is dropped (it would show a result for other inputs) */
        let curveSeq = 0, calSeq = 0;
        const curveForm = h('form', {class: 'stack', id: 'cv-form', onsubmit: async ev => {
            ev.preventDefault();
            const my = ++curveSeq;
            curveOut.replaceChildren(h('p', {class: 'note', text: 'computing…'}));
            const body = {event: cf.event(), accountant: cf.acct.value,
                          epsilon_range: {min: 0, max: Number(epsMax.value), points: 41},
                          tradeoff_points: 41};
            try {
                const r = (await api('/v1/curve', {method: 'POST', body})).data;
                if (my !== curveSeq) return;
                banner('');
                curveOut.replaceChildren(curveResult(r));
            } catch (e) {
                if (my !== curveSeq) return;
                curveOut.replaceChildren(h('p', {class: 'err', id: 'cv-err', text: problemText(e)}));
            }
        }}, cf.labels, h('label', {}, 'ε up to', epsMax), h('button', {type: 'submit', id: 'cv-go', text: 'Plot'}));

        const kf = eventFields('cb', false);
        const solve = h('select', {id: 'cb-solve'},
            h('option', {value: 'rounds', text: 'rounds M'}),
            h('option', {value: 'noise_multiplier', text: 'noise multiplier σ'}));
        const tEps = h('input', {id: 'cb-eps', type: 'number', step: 'any', min: 0, value: '1', size: 6});
        const tDelta = h('input', {id: 'cb-delta', type: 'number', step: 'any', min: 0, value: '1e-6', size: 8});
        const calOut = h('div', {class: 'result', id: 'cb-out'});
        const calForm = h('form', {class: 'stack', id: 'cb-form', onsubmit: async ev => {
            ev.preventDefault();
            const my = ++calSeq;
            calOut.replaceChildren(h('p', {class: 'note', text: 'computing…'}));
            const e = kf.event();
            if (solve.value === 'noise_multiplier') delete e.noise_multiplier;
            if (solve.value === 'noise_multiplier' && e.class_name === 'ShuffledDpSgdEpochDpEvent')
                e.rounds = 10000;
            const body = {event: e, accountant: kf.acct.value, solve_for: solve.value,
                          target: {epsilon: Number(tEps.value), delta: Number(tDelta.value)}};
            try {
                const r = (await api('/v1/calibrate', {method: 'POST', body})).data;
                if (my !== calSeq) return;
                banner('');
                calOut.replaceChildren(calibrationResult(r));
            } catch (err) {
                if (my !== calSeq) return;
                calOut.replaceChildren(h('p', {class: 'err', id: 'cb-err', text: problemText(err)}));
            }
        }}, kf.labels, h('label', {}, 'solve for', solve), h('label', {}, 'target ε', tEps),
            h('label', {}, 'target δ', tDelta), h('button', {type: 'submit', id: 'cb-go', text: 'Calibrate'}));

        show(
            h('h2', {text: 'Compute'}),
            h('div', {class: 'panel'}, h('h3', {text: 'δ(ε) and the trade-off curve of an event'}),
              curveForm,
              h('p', {class: 'note', text: 'For a shuffled epoch the exact shuffled accountant ' +
                      '(shuffle_exact, the default) answers with Theorem 4.1\'s δ beside it.'}),
              curveOut),
            h('div', {class: 'panel'}, h('h3', {text: 'Calibrate'}), calForm,
              h('p', {class: 'note', text: 'With noise multiplier σ as the unknown, a shuffled epoch ' +
                      'is taken with M = 10 000 rounds.'}), calOut));
        stamp(false);
    }

    function curveResult(r) {
        const pts = (r.curve || []).map(p => [p.epsilon, p.delta]);
        const thm = r.theorem_4_1 && typeof r.theorem_4_1.delta === 'number' ? r.theorem_4_1.delta : null;
        const thmNot = r.theorem_4_1 && thm === null; /* its conditions fail for this event */
        const series = [{name: `δ(ε), ${r.accountant} (${r.guarantee})`, points: pts}];
        if (thm !== null)
            series.push({name: 'Theorem 4.1 (total variation)', dashed: true,
                         points: pts.map(p => [p[0], thm])});
        const to = (r.tradeoff || []).map(p => [p.alpha, p.beta]);
        const toSeries = [{name: `β(α), ${r.accountant}`, points: to},
                          {name: 'no privacy: 1 − α', dashed: true, points: [[0, 1], [1, 0]]}];
        if (thm !== null)
            toSeries.push({name: 'Theorem 4.1: 1 − α − δ', dashed: true,
                           points: [[0, Math.max(0, 1 - thm)], [Math.max(0, 1 - thm), 0]]});
        const rows = (r.curve || []).filter((_, i) => i % 4 === 0).map(p => h('tr', {},
            h('td', {class: 'num', text: fmt(p.epsilon)}),
            h('td', {class: 'num'}, num(null, p.delta, fmt(p.delta, 'up'), 'cv-delta')),
            thm !== null ? h('td', {class: 'num'}, num(null, thm, fmt(thm, 'up'), 'cv-thm')) : null));
        return h('div', {},
            h('p', {}, 'accountant ', h('b', {id: 'cv-res-acct', text: r.accountant}), ', guarantee ',
              h('b', {id: 'cv-res-guarantee', text: r.guarantee}),
              thm !== null ? [' · Theorem 4.1 δ = ', num('cv-thm41', thm, fmt(thm, 'up')),
                              ' (the same for every ε: a total-variation bound)'] : null,
              thmNot ? h('span', {id: 'cv-thm41-not', text: ' · Theorem 4.1 does not cover this event ' +
                                  '(its conditions fail): only the exact accountant answers.'}) : null),
            (r.warnings || []).length ? h('p', {class: 'note', text: r.warnings.join(' ')}) : null,
            h('div', {class: 'panels'},
              h('div', {}, lineChart(series, {id: 'chart-delta', logY: true, xLabel: 'ε',
                                               yLabel: 'δ (log scale)', empty: 'δ is 0 over this range'})),
              h('div', {}, lineChart(toSeries, {id: 'chart-tradeoff', xMin: 0, xMax: 1, yMin: 0, yMax: 1,
                                                 xLabel: 'α (type I error)', yLabel: 'β (type II error)'}))),
            h('table', {id: 'cv-table'}, h('thead', {}, h('tr', {}, h('th', {class: 'num', text: 'ε'}),
                h('th', {class: 'num', text: `δ (${r.accountant})`}),
                thm !== null ? h('th', {class: 'num', text: 'δ (Theorem 4.1)'}) : null)),
              h('tbody', {}, rows)));
    }

    function calibrationResult(r) {
        const d = r.details || {};
        const v = r.solve_for === 'rounds' ? fmtInt(r.value) : fmt(r.value, 'up');
        return h('div', {},
            h('p', {}, `${r.solve_for} = `, num('cb-value', r.value, v), ' by ',
              h('b', {text: r.accountant}), ` (${r.guarantee}); achieved ε = `,
              num('cb-ach-eps', r.achieved && r.achieved.epsilon, fmt(r.achieved && r.achieved.epsilon, 'up')),
              ', δ = ', num('cb-ach-delta', r.achieved && r.achieved.delta, fmt(r.achieved && r.achieved.delta, 'up'))),
            d.theorem_4_1_value !== undefined
                ? h('p', {}, 'Theorem 4.1 would need ', num('cb-thm41', d.theorem_4_1_value,
                        typeof d.theorem_4_1_value === 'number' ? fmtInt(d.theorem_4_1_value) : String(d.theorem_4_1_value)),
                    ' for the same target.')
                : null,
            (r.warnings || []).length ? h('p', {class: 'note', text: r.warnings.join(' ')}) : null);
    }

    /* ---- navigation and polling ---------------------------------------------------------- */

    /* #/NAME[/ARG][?QUERY]: #/overview?res=hour, #/clients?status=stuck, #/client/ID */
    function route() {
        const m = /^#\/([a-z]+)(?:\/([^?]*))?(?:\?(.*))?$/.exec(location.hash || '');
        return m ? {name: m[1], arg: m[2] !== undefined ? decodeURIComponent(m[2]) : null,
                    query: new URLSearchParams(m[3] || '')}
                 : {name: 'overview', arg: null, query: new URLSearchParams()};
    }

    async function refresh(force) {
        /* a poll while an answer is awaited waits for the next tick (else, with answers slower
         * than the polling interval, every poll would drop the one before and none show),
         * unless that answer is 30 s late (a stalled connection must not stop the polling) */
        if (!force && state.inflight && Date.now() - state.inflight < 30000) return;
        const gen = ++state.generation, r = route();
        state.inflight = Date.now();
        for (const a of document.querySelectorAll('nav a'))
            a.classList.toggle('active', a.id === 'nav-' + (r.name === 'client' ? 'clients' : r.name));
        const checked = conditions(gen);
        try {
            if (r.name === 'clients') await clients(gen, force);
            else if (r.name === 'client' && r.arg) await client(gen, r.arg, force);
            else if (r.name === 'compute') { if (!document.getElementById('cv-form')) compute(); }
            else await overview(gen, r.query);
            await checked;
        } catch (e) {
            if (gen === state.generation) failed(e);
        } finally {
            if (gen === state.generation) state.inflight = 0;
        }
    }

    function navigate() {
        const r = route();
        if (r.name === 'clients' && r.query.has('status')) {
            /* a link to a filtered list (#/clients?status=stuck) */
            const want = r.query.get('status');
            if (want !== state.clients.status) {
                state.clients.status = want;
                state.clients.cursors = [null];
                clientsControls = null;
            }
        }
        state.generation++;
        clearInterval(state.timer);
        show(h('p', {text: 'Loading…'}));
        refresh(true);
        if (route().name !== 'compute')
            state.timer = setInterval(() => refresh(false), POLL_MS);
    }

    function init() {
        const form = document.getElementById('keyform'), input = document.getElementById('apikey');
        if (state.key) showKeyForm(true);
        form.addEventListener('submit', ev => {
            ev.preventDefault();
            state.key = input.value.trim();
            input.value = '';
            if (state.key) sessionStorage.setItem(KEY_STORE, state.key);
            else sessionStorage.removeItem(KEY_STORE);
            state.cache.clear();
            banner('');
            navigate();
        });
        document.getElementById('key-forget').addEventListener('click', () => {
            state.key = '';
            sessionStorage.removeItem(KEY_STORE);
            state.cache.clear();
            navigate();
        });
        window.addEventListener('hashchange', navigate);
        navigate();
    }

    /* exposed for the browser tests: the formatting the page uses */
    window.dpbudgetDashboard = {fmt, fmtInt, fmtBytes, fmtPct};
    init();
})();
