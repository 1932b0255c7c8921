// httplite dashboard: live figures from /_httplite/events (Server-Sent
// Events), or from polling /_httplite/stats when a stream cannot be had.
// Plain JavaScript, no library; charts are drawn on <canvas> below. Every
// figure is also left in the DOM as data-value, for scripts/browser-test.sh.
'use strict';

(function () {
  const WINDOW = 180;          // samples kept (about 3 minutes at one a second)
  const POLL_MS = 1000;        // polling interval when there is no stream
  const SSE_RETRY_MS = 30000;  // how soon polling tries a stream again
  const COLORS = ['#2563eb', '#16a34a', '#d97706', '#dc2626', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

  const history = [];          // [{t, doc}], oldest first
  let updates = 0;
  let source = null;           // the EventSource, while there is one
  let pollTimer = null;

  const $ = (id) => document.getElementById(id);

  function setFigure(id, value, text) {
    const el = $(id);
    if (!el) return;
    el.dataset.value = String(value);
    el.textContent = text === undefined ? fmt(value) : text;
  }

  function fmt(n) {
    if (typeof n !== 'number' || !isFinite(n)) return String(n);
    if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + ' G';
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + ' M';
    if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + ' k';
    return Number.isInteger(n) ? String(n) : n.toFixed(1);
  }

  function fmtUptime(s) {
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    if (d) return d + ' d ' + h + ' h';
    if (h) return h + ' h ' + m + ' min';
    if (m) return m + ' min ' + (s % 60) + ' s';
    return s + ' s';
  }

  function sum(obj) {
    return Object.values(obj || {}).reduce((a, b) => a + (typeof b === 'number' ? b : 0), 0);
  }

  // Per-second rate of a counter between two samples (0 if it went back:
  // a restarted server).
  function rate(prev, cur, get) {
    if (!prev) return 0;
    const dt = cur.t - prev.t;
    const dv = get(cur.doc) - get(prev.doc);
    return dt > 0 && dv > 0 ? dv / dt : 0;
  }

  // ---- the feed -------------------------------------------------------

  function onDoc(doc) {
    const t = typeof doc.uptime_seconds === 'number' ? doc.uptime_seconds : performance.now() / 1000;
    const last = history[history.length - 1];
    if (last && t < last.t) history.length = 0; // the server restarted
    if (last && t === last.t) return;
    history.push({ t, doc });
    while (history.length > WINDOW + 1) history.shift();
    updates += 1;
    document.body.dataset.updates = String(updates);
    render();
  }

  function setSource(kind) {
    document.body.dataset.source = kind;
    $('source').textContent = kind === 'sse' ? 'Server-Sent Events' : kind === 'poll' ? 'polling /_httplite/stats' : kind;
  }

  function startStream() {
    if (!window.EventSource || /[?&]poll\b/.test(location.search)) {
      startPolling();
      return;
    }
    stopPolling();
    source = new EventSource('/_httplite/events');
    source.onopen = () => setSource('sse');
    source.onmessage = (e) => {
      try { onDoc(JSON.parse(e.data)); } catch (err) { /* a bad event: wait for the next */ }
    };
    source.onerror = () => {
      // CONNECTING: the browser retries by itself (the server's retry:).
      // CLOSED: refused (503: too many viewers) or gone: poll instead.
      if (source && source.readyState === EventSource.CLOSED) {
        source = null;
        startPolling();
        setTimeout(startStream, SSE_RETRY_MS);
      } else {
        setState('reconnecting', 'offline');
      }
    };
  }

  function startPolling() {
    setSource('poll');
    if (pollTimer) return;
    const poll = () => {
      fetch('/_httplite/stats', { cache: 'no-store' })
        .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
        .then(onDoc)
        .catch(() => setState('unreachable', 'offline'));
    };
    poll();
    pollTimer = setInterval(poll, POLL_MS);
  }

  function stopPolling() {
    if (pollTimer) clearInterval(pollTimer);
    pollTimer = null;
  }

  function setState(text, cls) {
    const el = $('state');
    el.textContent = text;
    el.className = 'badge ' + cls;
  }

  // ---- rendering ------------------------------------------------------

  function series(get) {
    const out = [];
    for (let i = 1; i < history.length; i++) out.push(rate(history[i - 1], history[i], get));
    return out;
  }

  function render() {
    const cur = history[history.length - 1];
    const prev = history[history.length - 2];
    const doc = cur.doc;
    setState(doc.state || '?', doc.state === 'serving' ? 'serving' : 'draining');
    const kinds = [...new Set((doc.workers || []).map((w) => (w.runtime && w.runtime.kind) || '?'))];
    $('runtime').textContent = kinds.join(', ') || '?';
    setFigure('uptime', doc.uptime_seconds, fmtUptime(doc.uptime_seconds || 0));

    const rps = rate(prev, cur, (d) => d.requests);
    setFigure('rps', Math.round(rps * 10) / 10);
    setFigure('open', doc.connections.open);
    setFigure('requests', doc.requests);
    setFigure('connections', doc.connections.total);
    setFigure('viewers', doc.events ? doc.events.viewers : 0);
    // Errors and timeouts over the last minute of samples.
    const minuteAgo = history.find((h) => h.t >= cur.t - 60) || cur;
    const bad = (d) => sum(d.errors) + sum(d.timeouts);
    setFigure('errors-per-min', bad(doc) - bad(minuteAgo.doc));
    const span = history.length > 1 ? cur.t - history[0].t : 0;
    $('window').textContent = span >= 90 ? Math.round(span / 60) + ' minutes' : Math.round(span) + ' s';

    chart('rps', [{ label: 'requests/s', values: series((d) => d.requests) }]);
    chart('open', [{ label: 'open', values: history.map((h) => h.doc.connections.open) },
      { label: 'event viewers', values: history.map((h) => (h.doc.events ? h.doc.events.viewers : 0)) }]);
    chart('responses', Object.keys(doc.responses).map((k) => ({ label: k, values: series((d) => d.responses[k]) })));
    const errs = [];
    for (const k of Object.keys(doc.errors)) errs.push({ label: k, values: series((d) => d.errors[k]) });
    for (const k of Object.keys(doc.timeouts)) errs.push({ label: k + ' timeout', values: series((d) => d.timeouts[k]) });
    chart('errors', errs.filter((s) => s.values.some((v) => v > 0)).slice(0, COLORS.length), 'none in this window');

    renderTotals(doc);
    renderWorkers(doc, prev && prev.doc, prev ? cur.t - prev.t : 0);
    renderGroups(doc);
  }

  function renderTotals(doc) {
    const box = $('totals');
    box.replaceChildren(
      group('responses', doc.responses, 'total-responses'),
      group('errors', doc.errors, 'total-errors'),
      group('timeouts', doc.timeouts, 'total-timeouts'),
      group('event streams', doc.events || {}, 'total-events'));
  }

  // A titled list of the numbers in `obj` (nested objects flattened).
  function group(title, obj, idPrefix) {
    const div = document.createElement('div');
    div.className = 'group';
    const h = document.createElement('h3');
    h.textContent = title;
    const dl = document.createElement('dl');
    for (const [k, v] of flatten(obj)) {
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = typeof v === 'number' ? fmt(v) : String(v);
      dd.dataset.value = String(v);
      if (idPrefix) dd.id = idPrefix + '-' + k.replace(/[^a-z0-9]+/gi, '-');
      dl.append(dt, dd);
    }
    div.append(h, dl);
    return div;
  }

  function flatten(obj, prefix) {
    const out = [];
    for (const [k, v] of Object.entries(obj || {})) {
      const key = prefix ? prefix + '.' + k : k;
      if (v && typeof v === 'object' && !Array.isArray(v)) out.push(...flatten(v, key));
      else if (!Array.isArray(v)) out.push([key, v]);
    }
    return out;
  }

  // One row per counter any worker has, one column per worker: whatever
  // the runtime reports, with no list of names here.
  function renderWorkers(doc, prevDoc, dt) {
    const workers = doc.workers || [];
    const keys = [];
    const rows = workers.map((w) => new Map(flatten(w)));
    for (const row of rows) for (const k of row.keys()) if (k !== 'id' && !keys.includes(k)) keys.push(k);
    const prevRows = ((prevDoc && prevDoc.workers) || []).map((w) => new Map(flatten(w)));
    const table = $('workers');
    const head = document.createElement('tr');
    head.append(cell('th', 'counter'));
    workers.forEach((w) => head.append(cell('th', 'worker ' + w.id)));
    table.tHead.replaceChildren(head);
    const body = [];
    for (const k of keys) {
      const tr = document.createElement('tr');
      tr.append(cell('td', k));
      rows.forEach((row, i) => {
        const v = row.get(k);
        const td = cell('td', v === undefined ? '' : typeof v === 'number' ? fmt(v) : String(v));
        td.dataset.worker = String(workers[i].id);
        td.dataset.key = k;
        if (v !== undefined) td.dataset.value = String(v);
        const before = prevRows[i] && prevRows[i].get(k);
        if (typeof v === 'number' && typeof before === 'number' && dt > 0 && v > before) {
          const span = document.createElement('span');
          span.className = 'rate';
          span.textContent = '+' + fmt(Math.round(((v - before) / dt) * 10) / 10) + '/s';
          td.append(span);
        }
        tr.append(td);
      });
      body.push(tr);
    }
    table.tBodies[0].replaceChildren(...body);
  }

  function cell(tag, text) {
    const el = document.createElement(tag);
    el.textContent = text;
    return el;
  }

  // Every other object of the document (pool, jobs, tls, file cache...).
  function renderGroups(doc) {
    const known = ['connections', 'events', 'responses', 'timeouts', 'errors', 'workers'];
    const groups = Object.entries(doc)
      .filter(([k, v]) => v && typeof v === 'object' && !known.includes(k))
      .map(([k, v]) => {
        const g = group(k, v, 'group-' + k);
        g.id = 'group-' + k;
        return g;
      });
    $('groups').replaceChildren(...groups);
  }

  // ---- charts ---------------------------------------------------------

  // Draws lines for `list` ([{label, values}]) on canvas #chart-NAME, the
  // newest sample at the right edge, and writes the legend.
  function chart(name, list, emptyText) {
    const canvas = $('chart-' + name);
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 480, h = canvas.clientHeight || 160;
    if (canvas.width !== Math.round(w * ratio)) canvas.width = Math.round(w * ratio);
    if (canvas.height !== Math.round(h * ratio)) canvas.height = Math.round(h * ratio);
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 44, right = 6, top = 6, bottom = 16;
    const pw = w - left - right, ph = h - top - bottom;
    let max = 0;
    for (const s of list) for (const v of s.values) max = Math.max(max, v);
    const ymax = niceMax(max);
    g.font = '11px system-ui, sans-serif';
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    g.strokeStyle = '#e4e7ec';
    g.fillStyle = '#667085';
    g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      g.beginPath();
      g.moveTo(left, Math.round(y) + 0.5);
      g.lineTo(left + pw, Math.round(y) + 0.5);
      g.stroke();
      g.fillText(fmt((ymax * i) / 4), left - 4, y);
    }
    g.textAlign = 'left';
    g.textBaseline = 'alphabetic';
    g.fillText('-' + WINDOW + ' s', left, h - 3);
    g.textAlign = 'right';
    g.fillText('now', left + pw, h - 3);
    const step = pw / WINDOW;
    list.forEach((s, i) => {
      g.strokeStyle = COLORS[i % COLORS.length];
      g.lineWidth = 1.5;
      g.beginPath();
      const n = s.values.length;
      s.values.forEach((v, j) => {
        const x = left + pw - (n - 1 - j) * step;
        const y = top + ph - (ymax > 0 ? (v / ymax) * ph : 0);
        if (j === 0) g.moveTo(x, y); else g.lineTo(x, y);
      });
      g.stroke();
    });
    const legend = $('legend-' + name);
    if (list.length === 0) {
      legend.textContent = emptyText || '';
      return;
    }
    legend.replaceChildren(...list.map((s, i) => {
      const span = document.createElement('span');
      span.className = 'c' + (i % COLORS.length);
      const last = s.values[s.values.length - 1];
      span.textContent = s.label + ' ' + fmt(last === undefined ? 0 : Math.round(last * 10) / 10);
      return span;
    }));
  }

  // The top of the y axis: four grid steps of 1, 2 or 5 times a power of
  // ten (whole numbers for small counts).
  function niceMax(v) {
    if (v <= 0) return 4;
    const raw = v / 4;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return 4 * Math.max(1, m * p);
    return 40 * p;
  }

  document.addEventListener('DOMContentLoaded', startStream);
})();
