/*
 * charts.js - the dashboard's numbers for people and its charts: formatting (significant
 * digits rounded in a stated direction) and bar and line charts drawn as plain SVG, no
 * dependency. Calls nothing of the page; app.js (loaded after it) takes them from
 * window.dpbudgetCharts. Every element is made with createElementNS and textContent: labels
 * are data, never markup.
 */
'use strict';

(function () {
    const SVGNS = 'http://www.w3.org/2000/svg';

    /* ---- numbers for people ---------------------------------------------------------------- */

    /* x to 4 significant digits, rounded in direction dir: 'up' for spends and deltas (never
     * shown below the truth), 'down' for what remains, 'near' for neutral figures. */
    function fmt(x, dir) {
        if (x === null || x === undefined) return '—';
        if (x === 'infinite') return '∞';
        if (typeof x !== 'number' || !isFinite(x)) return String(x);
        if (x === 0) return '0';
        const e = Math.floor(Math.log10(Math.abs(x)));
        const p = e - 3;
        let q = x / Math.pow(10, p);
        const r = Math.round(q);
        if (Math.abs(q - r) < 1e-9 * Math.abs(q)) q = r;
        q = dir === 'up' ? Math.ceil(q) : dir === 'down' ? Math.floor(q) : Math.round(q);
        const v = q * Math.pow(10, p);
        if (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e6) {
            const digits = Math.max(0, -p);
            return String(Number(v.toFixed(Math.min(digits, 20))));
        }
        const m = q / 1000;
        return Number(m.toFixed(3)) + 'e' + (e + (Math.abs(m) >= 10 ? 1 : 0));
    }

    function fmtInt(n) {
        return typeof n === 'number' ? n.toLocaleString('en-US') : '—';
    }

    function fmtBytes(n) {
        if (typeof n !== 'number') return '—';
        if (n < 1024) return n + ' B';
        const units = ['KiB', 'MiB', 'GiB', 'TiB'];
        let v = n / 1024, i = 0;
        while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
        return v.toFixed(v < 10 ? 2 : 1) + ' ' + units[i];
    }

    function fmtSeconds(s) {
        if (typeof s !== 'number' || !isFinite(s)) return '—';
        if (s < 1e-3) return fmt(s * 1e6, 'up') + ' µs';
        if (s < 1) return fmt(s * 1e3, 'up') + ' ms';
        return fmt(s, 'up') + ' s';
    }

    /* whole minutes, hours or days as such, else seconds */
    function fmtDuration(s) {
        if (typeof s !== 'number' || !(s > 0)) return '—';
        for (const [n, w] of [[86400, 'day'], [3600, 'hour'], [60, 'minute']])
            if (s % n === 0) return s / n === 1 ? '1 ' + w : `${fmtInt(s / n)} ${w}s`;
        return fmtInt(s) + ' s';
    }

    function fmtPct(f) {
        return f === null ? '—' : fmt(f * 100, 'up') + ' %';
    }

    /* ---- SVG (createElementNS, textContent only) --------------------------------------------- */

    function s(tag, attrs, ...kids) {
        const el = document.createElementNS(SVGNS, tag);
        for (const [k, v] of Object.entries(attrs || {})) {
            if (v === undefined || v === null) continue;
            if (k === 'text') el.textContent = v;
            else el.setAttribute(k, String(v));
        }
        for (const kid of kids.flat()) if (kid) el.append(kid);
        return el;
    }

    /* ---- charts ------------------------------------------------------------------------------ */

    function niceTicks(lo, hi, n) {
        if (!(hi > lo)) hi = lo + 1;
        const step0 = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
        const step = [1, 2, 2.5, 5, 10].map(f => f * mag).find(st => st >= step0) || step0;
        const ticks = [];
        /* from the first tick at or above lo to the first at or above hi (at most 50) */
        for (let v = Math.ceil(lo / step - 1e-9) * step; ticks.length < 50; v += step) {
            ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
            if (v >= hi - step * 1e-9) break;
        }
        return ticks;
    }

    /* bins: [{label, value, cls, attrs}] */
    function barChart(bins, o) {
        const W = o.width || 520, H = o.height || 220, L = 44, R = 10, T = 14, B = 40;
        const max = Math.max(1, ...bins.map(b => b.value));
        const ticks = niceTicks(0, max, 4).filter(Number.isInteger); /* counts: whole ticks */
        const top = ticks[ticks.length - 1] || max;
        const bw = (W - L - R) / bins.length;
        const y = v => T + (H - T - B) * (1 - v / top);
        const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
                              'aria-label': o.title || 'bar chart', id: o.id});
        for (const t of ticks) {
            svg.append(s('line', {class: 'gridline', x1: L, x2: W - R, y1: y(t), y2: y(t)}));
            svg.append(s('text', {x: L - 6, y: y(t) + 4, 'text-anchor': 'end', text: fmtInt(t)}));
        }
        bins.forEach((b, i) => {
            const x = L + i * bw + 2, hgt = Math.max(0, y(0) - y(b.value));
            svg.append(s('rect', Object.assign({class: 'bar ' + (b.cls || ''), x, y: y(b.value),
                                                width: Math.max(1, bw - 4), height: hgt,
                                                'data-count': b.value}, b.attrs || {}),
                         s('title', {text: `${b.label}: ${fmtInt(b.value)}`})));
            if (b.value > 0)
                svg.append(s('text', {class: 'barlabel', x: x + (bw - 4) / 2, y: y(b.value) - 3,
                                      text: fmtInt(b.value)}));
            svg.append(s('text', {x: x + (bw - 4) / 2, y: H - B + 14, 'text-anchor': 'middle',
                                  text: b.label}));
        });
        svg.append(s('line', {class: 'axis', x1: L, x2: W - R, y1: y(0), y2: y(0)}));
        if (o.xLabel)
            svg.append(s('text', {x: (L + W - R) / 2, y: H - 6, 'text-anchor': 'middle',
                                  text: o.xLabel}));
        return svg;
    }

    /* series: [{name, points: [[x, y]], dashed, cls}]; o.logY plots log10(y) (y <= 0
     * dropped); o.xTicks: the x ticks to draw (else round numbers). Each path carries its
     * series' name, its number of points, the sum of its y values (data-sum) and its last
     * (data-last), so that what is drawn can be checked against the API. */
    function lineChart(series, o) {
        const W = o.width || 520, H = o.height || 240, L = 58, R = 12, T = 12, B = 52;
        const tr = p => [p[0], o.logY ? (p[1] > 0 ? Math.log10(p[1]) : null) : p[1]];
        const pts = series.map(se => se.points.map(tr).filter(p => p[1] !== null && isFinite(p[1])));
        const all = pts.flat();
        const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
                              'aria-label': o.title || 'line chart', id: o.id});
        if (all.length === 0) {
            svg.append(s('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle',
                                  text: o.empty || 'nothing to plot yet'}));
            return svg;
        }
        let x0 = o.xMin !== undefined ? o.xMin : Math.min(...all.map(p => p[0]));
        let x1 = o.xMax !== undefined ? o.xMax : Math.max(...all.map(p => p[0]));
        let y0 = o.yMin !== undefined ? o.yMin : Math.min(...all.map(p => p[1]));
        let y1 = o.yMax !== undefined ? o.yMax : Math.max(...all.map(p => p[1]));
        if (x1 <= x0) x1 = x0 + 1;
        if (y1 <= y0) { y1 = y0 + (o.logY ? 1 : Math.max(1, Math.abs(y0) * 0.1)); }
        if (o.logY) { y0 = Math.floor(y0); y1 = Math.ceil(y1); }
        const yt = o.logY ? niceTicks(y0, y1, 5).filter(t => Number.isInteger(t)) : niceTicks(y0, y1, 4);
        y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
        const X = v => L + (W - L - R) * (v - x0) / (x1 - x0);
        const Y = v => T + (H - T - B) * (1 - (v - y0) / (y1 - y0));
        for (const t of yt) {
            svg.append(s('line', {class: 'gridline', x1: L, x2: W - R, y1: Y(t), y2: Y(t)}));
            svg.append(s('text', {x: L - 6, y: Y(t) + 4, 'text-anchor': 'end',
                                  text: o.logY ? '1e' + t : (o.yFmt || fmt)(t)}));
        }
        for (const t of o.xTicks ? o.xTicks(x0, x1) : niceTicks(x0, x1, 5)) {
            svg.append(s('line', {class: 'axis', x1: X(t), x2: X(t), y1: H - B, y2: H - B + 4}));
            svg.append(s('text', {x: X(t), y: H - B + 16, 'text-anchor': 'middle',
                                  text: (o.xFmt || fmt)(t)}));
        }
        svg.append(s('line', {class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B}));
        svg.append(s('line', {class: 'axis', x1: L, x2: L, y1: T, y2: H - B}));
        pts.forEach((p, i) => {
            if (p.length === 0) return;
            const d = p.map((q, j) => (j ? 'L' : 'M') + X(q[0]).toFixed(1) + ' ' + Y(q[1]).toFixed(1)).join(' ');
            const cls = series[i].cls || `s${i % 8}`;
            const sum = series[i].points.reduce((a, q) => a + (typeof q[1] === 'number' ? q[1] : 0), 0);
            svg.append(s('path', {class: `line ${cls}` + (series[i].dashed ? ' dashed' : ''), d,
                                  'data-series': series[i].name, 'data-points': p.length,
                                  'data-sum': sum, 'data-last': p[p.length - 1][1]}));
            if (p.length < 40)
                for (const q of p)
                    svg.append(s('circle', {class: `dot ${cls}`, cx: X(q[0]), cy: Y(q[1]), r: 2.5}));
        });
        let lx = L + 4;
        series.forEach((se, i) => {
            svg.append(s('line', {class: `line ${se.cls || 's' + (i % 8)}` + (se.dashed ? ' dashed' : ''), x1: lx,
                                  x2: lx + 18, y1: H - 12, y2: H - 12}));
            const t = s('text', {class: 'legend', x: lx + 22, y: H - 8, text: se.name});
            svg.append(t);
            lx += 30 + se.name.length * 6.2;
        });
        if (o.xLabel)
            svg.append(s('text', {x: W - R, y: H - B + 30, 'text-anchor': 'end', text: o.xLabel}));
        if (o.yLabel)
            svg.append(s('text', {x: L + 4, y: T + 2, text: o.yLabel}));
        return svg;
    }

    /* x ticks at round times: the smallest step of the list that gives at most 6 ticks */
    function timeTicks(x0, x1) {
        const m = 60e3, hr = 3600e3, d = 86400e3;
        const steps = [m, 2 * m, 5 * m, 10 * m, 15 * m, 30 * m, hr, 2 * hr, 3 * hr, 6 * hr, 12 * hr,
                       d, 2 * d, 7 * d, 14 * d, 30 * d, 61 * d, 91 * d, 182 * d];
        const step = steps.find(st => (x1 - x0) / st <= 6) || steps[steps.length - 1];
        const ticks = [];
        for (let t = Math.ceil(x0 / step) * step; t <= x1 && ticks.length < 12; t += step) ticks.push(t);
        return ticks;
    }

    window.dpbudgetCharts = {fmt, fmtInt, fmtBytes, fmtSeconds, fmtDuration, fmtPct, s, niceTicks,
                             barChart, lineChart, timeTicks};
})();
