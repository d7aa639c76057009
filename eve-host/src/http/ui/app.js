/*
 * eve inspector: a small single-page view of runs, served by eve-runtime at /ui.
 *
 * The URL's hash chooses the view, so back, forward and deep links work:
 *   #/  or  #/runs?status=..&tool=..   the runs list
 *   #/runs/<runId>[?at=N]              one run, optionally as of journal entry N
 *
 * All data comes from the JSON API under /v1 on the same origin. Server text (run ids, prompts,
 * outputs) is untrusted: it reaches the page only as text nodes and attribute values, never as HTML.
 * The page runs under a strict Content-Security-Policy: no inline scripts, styles or handlers.
 */
'use strict';

(() => {
  // ---- Constants -----------------------------------------------------------------------------

  const PAGE_SIZE = 50;
  const STATUSES = ['active', 'parked', 'running', 'completed', 'failed', 'cancelled'];

  // Named SSE events that may change what a run view shows. `model.text` is left out on purpose:
  // it streams model output token by token and never changes the journal.
  const RUN_EVENTS = [
    'run.started', 'run.resumed', 'run.continued', 'run.parked', 'run.finished',
    'step.started', 'step.succeeded', 'step.failed', 'step.replayed',
    'timer.scheduled', 'timer.fired', 'hook.received', 'cancel.requested',
    'input.requested', 'input.resolved', 'authorization.required', 'authorization.completed',
    'history.warning', 'value.published', 'lagged',
  ];

  // Events after which the first page of the runs list is worth reloading.
  const LIST_EVENTS = ['run.started', 'run.finished', 'run.parked', 'run.resumed', 'lagged'];

  // ---- DOM helpers ---------------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  /**
   * Creates an element. `props` are attributes, except `class`, `dataset` and `on<event>`
   * (a listener, never an inline handler). Children are nodes or strings (added as text).
   */
  function h(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false || child === '') continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  /** A class-name-safe form of a server word such as a status. */
  const token = (word) => String(word ?? '').toLowerCase().replace(/[^a-z0-9-]/g, '');

  /** A table's header row of column names. */
  const columns = (...names) => h('thead', {}, h('tr', {}, names.map((n) => h('th', { scope: 'col' }, n))));

  /** A keyboard-scrollable box for a wide table, named by the table's caption. */
  const scrollable = (captionId, table) =>
    h('div', { class: 'table-wrap', role: 'region', 'aria-labelledby': captionId, tabindex: '0' }, table);

  let uid = 0;
  const nextId = (prefix) => `${prefix}-${++uid}`;

  // ---- Formatting ----------------------------------------------------------------------------

  function truncate(text, max) {
    return text.length > max ? text.slice(0, max - 1) + '…' : text;
  }

  const pretty = (value) => JSON.stringify(value, null, 2) ?? String(value);

  /** A text badge; the colour only repeats what the text says. */
  function badge(kind, word) {
    return h('span', { class: `badge ${kind}-${token(word)}` }, String(word ?? ''));
  }

  /** Local time for people, with the ISO string kept in `datetime` (and shown on hover). */
  function localTime(iso) {
    if (!iso) return '—';
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    return h('time', { datetime: iso, title: iso }, date.toLocaleString());
  }

  /** "in 4 min", "3 s ago". */
  function relative(iso, now = Date.now()) {
    const ms = new Date(iso).getTime() - now;
    if (Number.isNaN(ms)) return '';
    const s = Math.abs(ms) / 1000;
    const text = s < 60 ? `${Math.round(s)} s`
      : s < 3600 ? `${Math.round(s / 60)} min`
        : s < 86400 ? `${Math.round(s / 3600)} h`
          : `${Math.round(s / 86400)} d`;
    return ms >= 0 ? `in ${text}` : `${text} ago`;
  }

  /** A deadline: the ISO time plus how far away it is, kept fresh by `tickRelativeTimes`. */
  function deadline(iso) {
    return [
      h('time', { datetime: iso }, iso),
      ' ',
      h('span', { class: 'relative', dataset: { at: iso } }, `(${relative(iso)})`),
    ];
  }

  function tickRelativeTimes() {
    for (const el of document.querySelectorAll('.relative[data-at]')) {
      el.textContent = `(${relative(el.dataset.at)})`;
    }
  }

  // ---- API: every request carries the cookie and the X-Eve-UI header; errors carry a sentence ----

  class ApiError extends Error {
    constructor(message, status) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, { method = 'GET', body } = {}) {
    const headers = { 'X-Eve-UI': '1', Accept: 'application/json' };
    const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch {
      throw new ApiError('The server could not be reached; check that eve is running, then try again.', 0);
    }
    const text = await response.text().catch(() => '');
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { /* not JSON: handled below */ }
    if (response.ok) return json;
    // Errors are `{"error": {"message", "field"}}`; the message says what was wrong and what to do.
    const error = json && json.error;
    const message = error && (typeof error === 'string' ? error : error.message);
    const sentence = typeof message === 'string' && message ? message
      : `The server answered ${response.status} ${response.statusText}`.trim() + '.';
    throw new ApiError(sentence, response.status);
  }

  const runPath = (runId) => '/v1/runs/' + encodeURIComponent(runId);

  // ---- Status areas: the error box (role=alert), the screen-reader announcer, the live indicator ----

  // Who showed the current error, so a later success of the same kind can clear it.
  let errorOwner = null;

  function showError(err, owner = 'action') {
    const box = $('error');
    errorOwner = owner;
    box.hidden = false;
    if (err && err.status === 401) {
      box.replaceChildren(h('p', {}, 'Your sign-in has expired. ', h('a', { href: '/ui' }, 'Sign in again'), '.'));
    } else {
      box.replaceChildren(h('p', {}, err && err.message ? err.message : String(err)));
    }
  }

  function clearError(owner) {
    if (owner && owner !== errorOwner) return;
    const box = $('error');
    box.replaceChildren();
    box.hidden = true;
    errorOwner = null;
  }

  /** Says something to screen-reader users without moving focus. */
  function announce(message) {
    const region = $('announcer');
    region.textContent = '';
    setTimeout(() => { region.textContent = message; }, 50);
  }

  const LIVE_TEXT = { connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…', offline: 'Offline' };

  function setLive(state) {
    const el = $('live');
    el.hidden = state === 'off';
    el.className = `live live-${state}`;
    el.textContent = LIVE_TEXT[state] || '';
  }

  // ---- Live events: one EventSource per view, reconnecting, reported by the live indicator ----

  /**
   * Opens `url` as an event stream and calls `onEvent(type)` for each event. The browser retries a
   * dropped connection itself; a refused one (such as an expired sign-in) is retried here with a
   * growing delay. After any reconnection `onEvent('lagged')` is called, since events may have been
   * missed. Returns a function that closes the stream.
   */
  function openStream(url, onEvent) {
    let source = null;
    let retry = null;
    let failures = 0;
    let dropped = false;

    const deliver = (event) => onEvent(event.type);
    const connect = () => {
      setLive('connecting');
      source = new EventSource(url);
      source.onopen = () => {
        setLive('live');
        failures = 0;
        if (dropped) onEvent('lagged');
        dropped = false;
      };
      source.onerror = () => {
        dropped = true;
        if (source.readyState !== EventSource.CLOSED) return setLive('reconnecting');
        setLive('offline');
        failures += 1;
        retry = setTimeout(connect, Math.min(60, 5 * failures) * 1000);
      };
      source.onmessage = deliver;
      for (const name of RUN_EVENTS) source.addEventListener(name, deliver);
    };

    connect();
    return () => {
      clearTimeout(retry);
      if (source) source.close();
      setLive('off');
    };
  }

  /**
   * Wraps an async task so that at most one call is in flight and at most one more is queued;
   * calls made meanwhile fold into the queued one.
   */
  function coalesce(task) {
    let running = false;
    let queued = false;
    const run = async () => {
      if (running) { queued = true; return; }
      running = true;
      try { await task(); } finally {
        running = false;
        if (queued) { queued = false; run(); }
      }
    };
    return run;
  }

  // ---- Routing -------------------------------------------------------------------------------

  /** Parses the hash into a route, or null for a hash that is not a route (such as `#main`). */
  function parseRoute(hash) {
    const raw = hash.replace(/^#/, '') || '/';
    if (!raw.startsWith('/')) return null;
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    const match = path.match(/^\/runs\/(.+)$/);
    if (match) {
      let runId;
      try { runId = decodeURIComponent(match[1]); } catch { runId = match[1]; }
      const at = params.get('at');
      return { view: 'run', runId, at: at !== null && /^\d+$/.test(at) ? Number(at) : null };
    }
    return { view: 'runs', status: params.get('status') || '', tool: params.get('tool') || '' };
  }

  function runsHash(status, tool) {
    const params = new URLSearchParams();
    if (status) params.set('status', status);
    if (tool) params.set('tool', tool);
    const query = params.toString();
    return query ? `#/runs?${query}` : '#/';
  }

  function runHash(runId, at) {
    return `#/runs/${encodeURIComponent(runId)}` + (at === null ? '' : `?at=${at}`);
  }

  let current = null; // { key, view }

  /** Shows the view for the current hash; a new view gets focus on its heading when asked. */
  function route(moveFocus) {
    const next = parseRoute(location.hash);
    if (!next) return;
    const key = next.view === 'run' ? `run:${next.runId}` : 'runs';
    if (current && current.key === key) {
      current.view.update(next);
      return;
    }
    if (current) current.view.leave();
    clearError();
    const view = next.view === 'run' ? runView(next) : runsView(next);
    current = { key, view };
    if (moveFocus) view.title.focus();
  }

  // ---- Tools, loaded once for the tool filter ------------------------------------------------

  let toolsPromise = null;

  function loadTools() {
    if (toolsPromise) return toolsPromise;
    toolsPromise = api('/v1/tools').then((data) => {
      clearError('tools');
      return (data && data.tools) || [];
    }).catch((err) => {
      toolsPromise = null;
      showError(err, 'tools');
      return [];
    });
    return toolsPromise;
  }

  // ---- Runs list view ------------------------------------------------------------------------

  function runsView(initial) {
    let alive = true;
    let filters = { status: initial.status, tool: initial.tool };
    let before = null;   // the cursor of the page on screen; null is the first page
    let newer = [];      // cursors of the pages before it, the latest last
    let next = null;     // the cursor of the next older page, if any
    let loadToken = 0;
    let loading = false;
    let reloadTimer = null;

    const title = h('h2', { id: 'view-title', tabindex: '-1' }, 'Runs');
    const status = h('select', { id: 'status-filter', name: 'status' },
      h('option', { value: '' }, 'All statuses'),
      STATUSES.map((s) => h('option', { value: s }, s)));
    const tool = h('select', { id: 'tool-filter', name: 'tool' }, h('option', { value: '' }, 'All tools'));
    const form = h('form', { id: 'filters', class: 'filters', role: 'search', 'aria-label': 'Filter runs' },
      h('div', { class: 'field' }, h('label', { for: 'status-filter' }, 'Status'), status),
      h('div', { class: 'field' }, h('label', { for: 'tool-filter' }, 'Tool'), tool));
    form.addEventListener('submit', (event) => event.preventDefault());
    form.addEventListener('change', () => { location.hash = runsHash(status.value, tool.value); });

    const caption = h('caption', { id: 'runs-caption' });
    const body = h('tbody');
    const table = h('table', { id: 'runs' }, caption,
      columns('Run', 'Tool', 'Status', 'Created', 'Entries'), body);
    const wrap = scrollable('runs-caption', table);
    const empty = h('p', { class: 'empty', hidden: true }, 'No runs match these filters.');
    const newerButton = h('button', { type: 'button', disabled: true }, 'Newer');
    const olderButton = h('button', { type: 'button', disabled: true }, 'Older');
    newerButton.addEventListener('click', () => {
      if (loading) return;
      before = newer.pop() ?? null;
      load();
    });
    olderButton.addEventListener('click', () => {
      if (loading || !next) return;
      newer.push(before);
      before = next;
      load();
    });

    $('view').replaceChildren(title, form, wrap, empty,
      h('nav', { class: 'pager', 'aria-label': 'Pages of runs' }, newerButton, olderButton));
    document.title = 'Runs · eve inspector';

    /** Fills the tool filter, keeping a tool from the URL even if the server does not list it. */
    loadTools().then((tools) => {
      if (!alive) return;
      const names = new Set(tools.map((t) => t.name));
      if (filters.tool && !names.has(filters.tool)) tools = [...tools, { name: filters.tool }];
      const sorted = [...tools].sort((a, b) => String(a.name).localeCompare(String(b.name)));
      tool.replaceChildren(h('option', { value: '' }, 'All tools'),
        ...sorted.map((t) => h('option', { value: t.name, title: t.description || null },
          t.kind ? `${t.name} (${t.kind})` : t.name)));
      tool.value = filters.tool;
    });

    async function load() {
      const mine = ++loadToken;
      const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
      if (filters.status) params.set('status', filters.status);
      if (filters.tool) params.set('tool', filters.tool);
      if (before) params.set('before', before);
      loading = true;
      table.setAttribute('aria-busy', 'true');
      try {
        const data = (await api('/v1/runs?' + params)) || {};
        if (!alive || mine !== loadToken) return;
        clearError('runs');
        next = data.next ?? null;
        renderRows(data.runs || []);
      } catch (err) {
        if (alive && mine === loadToken) showError(err, 'runs');
      } finally {
        if (alive && mine === loadToken) {
          loading = false;
          table.removeAttribute('aria-busy');
          newerButton.disabled = before === null;
          olderButton.disabled = !next;
        }
      }
    }

    /** Replaces the rows, keeping keyboard focus on the same run's link if it had it. */
    function renderRows(runs) {
      const focusedRow = document.activeElement && document.activeElement.closest('tr[data-run-id]');
      const focusedId = focusedRow ? focusedRow.dataset.runId : null;
      body.replaceChildren(...runs.map(runRow));
      table.hidden = runs.length === 0;
      empty.hidden = runs.length !== 0;
      if (focusedId !== null) {
        const row = [...body.rows].find((r) => r.dataset.runId === focusedId);
        if (row) row.querySelector('a').focus();
      }
    }

    function runRow(run) {
      return h('tr', { dataset: { runId: run.runId } },
        h('td', {}, h('a', { href: runHash(run.runId, null) }, run.runId)),
        h('td', {}, run.tool),
        h('td', {}, badge('status', run.status)),
        h('td', {}, localTime(run.createdAt)),
        h('td', { class: 'num' }, String(run.entries ?? '')));
    }

    function apply(route) {
      filters = { status: route.status, tool: route.tool };
      status.value = STATUSES.includes(filters.status) ? filters.status : '';
      if (filters.tool && ![...tool.options].some((o) => o.value === filters.tool)) {
        tool.append(h('option', { value: filters.tool }, filters.tool));
      }
      tool.value = filters.tool;
      const described = [filters.status && `status ${filters.status}`, filters.tool && `tool ${filters.tool}`]
        .filter(Boolean);
      caption.textContent = 'Runs, newest first' + (described.length ? ` (${described.join(', ')})` : '');
      before = null;
      newer = [];
      load();
    }

    // New and finished runs show up on the first page, at most once a second.
    const closeStream = openStream('/v1/events', (type) => {
      if (!LIST_EVENTS.includes(type) || before !== null || reloadTimer) return;
      reloadTimer = setTimeout(() => { reloadTimer = null; if (alive) load(); }, 1000);
    });

    apply(initial);
    return {
      title,
      update: apply,
      leave() {
        alive = false;
        clearTimeout(reloadTimer);
        closeStream();
      },
    };
  }

  // ---- Run view: summary, questions, timeline with its scrubber, journal, pending deliveries ----

  function runView(initial) {
    const runId = initial.runId;
    let alive = true;
    let at = initial.at;      // the journal entry on view; null follows the live end
    let entries = 0;          // journal entries the run has now
    let lastStatus = null;    // the run status last seen, to announce changes
    let scrubTimer = null;

    const title = h('h2', { id: 'view-title', tabindex: '-1' }, runId);
    const summary = h('dl', { class: 'summary' });
    const input = h('pre');
    const inputBox = h('details', { class: 'input', hidden: true }, h('summary', {}, 'Input'), input);
    const cancel = cancelButton();

    const questionList = h('div', { class: 'questions' });
    const noQuestions = h('p', { class: 'empty' }, 'No open questions.');

    const scrubber = h('input', { type: 'range', id: 'scrubber', min: '0', max: '0', step: '1', value: '0' });
    const position = h('output', { id: 'scrubber-position', for: 'scrubber' });
    const latest = h('button', { type: 'button', id: 'latest' }, 'Latest');
    const travel = h('p', { id: 'time-travel', class: 'notice', hidden: true });
    const timelineBody = h('tbody');
    const journal = h('ol', { id: 'journal', start: '0' });
    const pendingList = h('ul', { class: 'plain pending' });
    const pendingSection = section('pending', 'Pending deliveries', pendingList);
    pendingSection.hidden = true;

    $('view').replaceChildren(
      h('p', { class: 'back' }, h('a', { href: '#/' }, '← All runs')),
      title, summary, inputBox, h('div', { class: 'actions' }, cancel.button),
      section('questions', 'Open questions', questionList, noQuestions),
      section('timeline-section', 'Timeline',
        h('div', { class: 'scrub' },
          h('label', { for: 'scrubber' }, 'Journal entry'), scrubber, position, latest),
        travel,
        scrollable('timeline-caption', h('table', { id: 'timeline' },
          h('caption', { id: 'timeline-caption' }, 'Operations'),
          columns('Op', 'Kind', 'Name', 'State', 'Attempts', 'Took', 'Deadline', 'Details'),
          timelineBody))),
      section('journal-section', 'Journal', journal),
      pendingSection);
    document.title = `${runId} · eve inspector`;

    const refresh = coalesce(load);

    scrubber.addEventListener('input', () => {
      const n = Number(scrubber.value);
      at = n >= entries - 1 ? null : n;
      showPosition();
      clearTimeout(scrubTimer);
      scrubTimer = setTimeout(() => { syncHash(); refresh(); }, 150);
    });
    latest.addEventListener('click', () => {
      at = null;
      syncHash();
      scrubber.value = scrubber.max;
      showPosition();
      scrubber.focus();
      refresh();
    });

    /** Fetches the timeline (as of `at`) and the open questions, and renders both. */
    async function load() {
      const requested = at;
      const query = requested === null ? '' : `?at=${requested}`;
      try {
        const [view, asked] = await Promise.all([
          api(runPath(runId) + '/timeline' + query),
          api(runPath(runId) + '/questions'),
        ]);
        if (!alive) return;
        clearError('load');
        renderQuestions((asked && asked.questions) || []);
        if (requested === at) render(view);
      } catch (err) {
        if (alive) showError(err, 'load');
      }
    }

    function render({ run, timeline, journal: lines, pending }) {
      entries = timeline.entries ?? (lines || []).length;
      renderSummary(run, timeline);
      cancel.show(run.status === 'running' || run.status === 'parked');
      renderScrubber(timeline);
      renderTimeline(timeline.ops || []);
      renderJournal(lines || []);
      renderPending(pending || []);
      const now = run.status;
      if (lastStatus !== null && now !== lastStatus) {
        announce(now === 'running' || now === 'parked' ? `Run is ${now}` : `Run ${now}`);
      }
      lastStatus = now;
    }

    function renderSummary(run, t) {
      const status = [h('span', { id: 'run-status', class: `badge status-${token(t.status)}` }, t.status)];
      if (at !== null) status.push(' ', h('span', { class: 'muted' }, `(now ${run.status})`));
      const rows = [
        ['Tool', t.tool || run.tool],
        ['Status', status],
        ['Created', localTime(run.createdAt)],
        ['Started', localTime(t.startedAt)],
        ['Journal entries', String(entries)],
      ];
      if (t.build) rows.push(['Build', `${t.build.version} (body ${t.build.fingerprint})`]);
      if (t.forkedFrom) {
        const from = t.forkedFrom;
        rows.push(['Forked from', ['run ', h('a', { href: runHash(from.run, null) }, from.run), ` at op ${from.op}`]]);
      }
      if (t.waitingFor && t.waitingFor.length) {
        rows.push(['Waiting for', h('ul', { class: 'plain' }, t.waitingFor.map((w) => h('li', {}, w)))]);
      }
      if (t.cancel) rows.push(['Cancel reason', t.cancel]);
      if (t.outcome !== undefined && t.outcome !== null) rows.push(['Outcome', h('pre', {}, pretty(t.outcome))]);
      summary.replaceChildren(...rows.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value))));
      inputBox.hidden = t.input === undefined;
      input.textContent = t.input === undefined ? '' : pretty(t.input);
    }

    /** Follows the live end, or stays on `at` (which tracks the user's dragging) while time-travelling. */
    function renderScrubber(t) {
      const max = Math.max(0, entries - 1);
      scrubber.max = String(max);
      scrubber.disabled = entries === 0;
      scrubber.value = String(at === null ? (t.at ?? max) : at);
      showPosition();
    }

    function showPosition() {
      const n = Number(scrubber.value);
      const text = entries === 0 ? 'no entries yet' : `entry ${n} of ${entries}`;
      position.textContent = text;
      scrubber.setAttribute('aria-valuetext', text);
      travel.hidden = at === null;
      travel.textContent = at === null ? '' : `Viewing entry ${at} of ${entries} (time travel)`;
      latest.disabled = at === null;
    }

    function syncHash() {
      history.replaceState(null, '', runHash(runId, at));
    }

    function renderTimeline(ops) {
      if (ops.length === 0) {
        timelineBody.replaceChildren(h('tr', {}, h('td', { colspan: '8', class: 'empty' }, 'No operations yet.')));
        return;
      }
      timelineBody.replaceChildren(...ops.map((op) => h('tr', {},
        h('th', { scope: 'row', class: 'num' }, String(op.op ?? '')),
        h('td', {}, op.kind),
        h('td', {}, h('code', {}, op.name ?? '')),
        h('td', {}, badge('state', op.state)),
        h('td', { class: 'num' }, op.attempts ? String(op.attempts) : ''),
        h('td', { class: 'num' }, op.tookMs === undefined ? '' : `${op.tookMs} ms`),
        h('td', {}, op.deadline ? deadline(op.deadline) : ''),
        h('td', {}, opDetails(op)))));
    }

    function opDetails(op) {
      const items = (op.details || []).map((d) => h('li', {}, String(d)));
      if (op.entries && op.entries.length) items.push(h('li', { class: 'muted' }, `journal: ${op.entries.join(', ')}`));
      return items.length ? h('ul', { class: 'plain details' }, items) : '';
    }

    /** One line per entry: its index, its type, and the rest as compact JSON. */
    function renderJournal(lines) {
      const fragment = document.createDocumentFragment();
      lines.forEach((entry, index) => {
        const { type, seq, ...rest } = entry && typeof entry === 'object' ? entry : { type: String(entry) };
        const data = Object.keys(rest).length ? JSON.stringify(rest) : '';
        fragment.append(h('li', { value: String(seq ?? index) },
          h('code', { class: 'entry-type' }, String(type ?? '?')), ' ',
          data && h('code', { class: 'entry-data', title: data.length > 200 ? truncate(data, 2000) : null },
            truncate(data, 200))));
      });
      journal.replaceChildren(fragment);
    }

    function renderPending(pending) {
      pendingSection.hidden = pending.length === 0;
      pendingList.replaceChildren(...pending.map((d) => h('li', {}, h('code', {}, truncate(JSON.stringify(d), 200)))));
    }

    /**
     * Keeps the forms of questions still open (so a half-filled answer survives a refresh), drops
     * answered ones and adds new ones in the server's order.
     */
    function renderQuestions(questions) {
      const shown = new Map([...questionList.children].map((form) => [form.dataset.requestId, form]));
      const wanted = new Set(questions.map((q) => q.requestId));
      for (const [requestId, form] of shown) if (!wanted.has(requestId)) form.remove();
      // Only forms out of place are moved: moving a node would take focus from a half-typed answer.
      questions.forEach((q, i) => {
        const form = shown.get(q.requestId) || questionForm(q);
        const here = questionList.children[i] || null;
        if (form !== here) questionList.insertBefore(form, here);
      });
      noQuestions.hidden = questions.length !== 0;
    }

    function questionForm(question) {
      const request = question.request || {};
      if (request.sampling) return samplingForm(question);
      return request.schema ? formOf(question) : choiceForm(question);
    }

    /**
     * A request for the client's model, shown as what it sends the model (the system prompt, the
     * messages, the token limit) and answered by a person standing in for the model: the text
     * typed becomes an assistant's completion, `{value: {role, content, model}}`; Decline
     * declines it.
     */
    function samplingForm({ requestId, request }) {
      const id = nextId('s');
      const sampling = request.sampling;
      const said = (content = {}) => content.type === 'text' ? content.text
        : `[${content.type || 'empty'}${content.mimeType ? `, ${content.mimeType}` : ''}]`;
      const messages = h('ol', { class: 'plain sampling-messages' }, (sampling.messages || []).map((m) =>
        h('li', {}, h('span', { class: 'role' }, m.role), ' ', said(m.content))));
      const system = sampling.systemPrompt
        ? h('p', { class: 'sampling-system' }, h('span', { class: 'role' }, 'system'), ' ', sampling.systemPrompt)
        : null;
      const limit = h('p', { class: 'muted' }, `At most ${sampling.maxTokens} tokens.`);
      const message = h('p', { id: `${id}-message`, class: 'form-message', role: 'alert' });
      const text = h('textarea', { id: `${id}-text`, name: 'completion', rows: 4 });
      const model = h('input', { type: 'text', id: `${id}-model`, name: 'model', autocomplete: 'off',
        value: 'a person, in the inspector' });
      const submit = h('button', { type: 'submit' }, 'Answer');
      const decline = h('button', { type: 'button' }, 'Decline');
      const form = h('form', { class: 'question sampling', dataset: { requestId }, novalidate: true },
        h('fieldset', { 'aria-describedby': message.id },
          h('legend', {}, 'A completion from the client\u2019s model'),
          system, messages, limit,
          h('div', { class: 'field' }, h('label', { for: text.id }, 'The completion'), text),
          h('div', { class: 'field' }, h('label', { for: model.id }, 'Model'), model),
          message, h('div', { class: 'actions' }, submit, decline)));
      const path = `${runPath(runId)}/questions/${encodeURIComponent(requestId)}`;
      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        if (!text.value.trim()) {
          message.textContent = 'Type the completion.';
          text.focus();
          return;
        }
        message.textContent = '';
        const value = { role: 'assistant', content: { type: 'text', text: text.value },
          model: model.value.trim() || 'a person, in the inspector', stopReason: 'endTurn' };
        await post(submit, path, { value }, 'Answer sent');
      });
      decline.addEventListener('click', () => post(decline, path, { action: 'decline' }, 'Declined'));
      return form;
    }

    /**
     * A form generated from a form question's schema: one labelled control a field (a select for
     * a choice, checkboxes for a choice of several, a checkbox for a boolean, a number or text
     * input otherwise), prefilled with the field's default. Sends `{value}`, or `{action: decline}`.
     */
    function formOf({ requestId, request }) {
      const id = nextId('f');
      const schema = request.schema;
      const required = new Set(schema.required || []);
      const message = h('p', { id: `${id}-message`, class: 'form-message', role: 'alert' });
      const fields = Object.entries(schema.properties || {}).map(([name, field], i) =>
        formField(`${id}-${i}`, name, field, required.has(name)));
      const submit = h('button', { type: 'submit' }, 'Answer');
      const decline = h('button', { type: 'button' }, 'Decline');
      const form = h('form', { class: 'question form', dataset: { requestId }, novalidate: true },
        h('fieldset', { 'aria-describedby': message.id },
          h('legend', {}, request.prompt ?? requestId),
          fields.map((field) => field.node),
          message, h('div', { class: 'actions' }, submit, decline)));
      const path = `${runPath(runId)}/questions/${encodeURIComponent(requestId)}`;
      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        const value = {};
        for (const field of fields) {
          const read = field.read();
          if (read === undefined && field.required) {
            message.textContent = `Fill in ${field.label}.`;
            field.focus();
            return;
          }
          if (read !== undefined) value[field.name] = read;
        }
        message.textContent = '';
        await post(submit, path, { value }, 'Answer sent');
      });
      decline.addEventListener('click', () => post(decline, path, { action: 'decline' }, 'Declined'));
      return form;
    }

    /** One field of a generated form: its node, how to read its value, and how to focus it. */
    function formField(id, name, field, required) {
      const label = field.title || name;
      const hint = field.description ? h('span', { id: `${id}-hint`, class: 'hint' }, field.description) : null;
      const described = hint ? hint.id : null;
      const titled = (options) => options.map((o) => ({ value: o.const, title: o.title ?? o.const }));
      const choices = field.oneOf ? titled(field.oneOf)
        : field.enum ? field.enum.map((value, i) => ({ value, title: (field.enumNames || [])[i] ?? value }))
        : null;
      const given = { name, label, required };
      if (field.type === 'array') {
        const items = field.items || {};
        const options = items.anyOf ? titled(items.anyOf) : (items.enum || []).map((value) => ({ value, title: value }));
        const chosen = new Set(field.default || []);
        const boxes = options.map((option, i) => h('input', { type: 'checkbox', id: `${id}-${i}`,
          value: option.value, checked: chosen.has(option.value) }));
        const node = h('fieldset', { class: 'field', 'aria-describedby': described },
          h('legend', {}, label), hint,
          options.map((option, i) => h('div', { class: 'option' }, boxes[i],
            h('label', { for: boxes[i].id }, option.title))));
        return { ...given, node, focus: () => boxes[0] && boxes[0].focus(),
          read: () => boxes.filter((box) => box.checked).map((box) => box.value) };
      }
      let control;
      let read;
      if (choices) {
        control = h('select', { id, name, 'aria-describedby': described },
          h('option', { value: '' }, required ? 'Choose…' : '(none)'),
          choices.map((choice) => h('option', { value: choice.value, selected: choice.value === field.default },
            choice.title)));
        read = () => control.value === '' ? undefined : control.value;
      } else if (field.type === 'boolean') {
        control = h('input', { type: 'checkbox', id, name, checked: field.default === true,
          'aria-describedby': described });
        read = () => control.checked;
      } else if (field.type === 'integer' || field.type === 'number') {
        control = h('input', { type: 'number', id, name, step: field.type === 'integer' ? 1 : 'any',
          min: field.minimum, max: field.maximum, value: field.default, 'aria-describedby': described });
        read = () => control.value.trim() === '' ? undefined : Number(control.value);
      } else {
        const kinds = { email: 'email', uri: 'url', date: 'date' };
        control = h('input', { type: kinds[field.format] || 'text', id, name, autocomplete: 'off',
          value: field.default, 'aria-describedby': described });
        read = () => control.value.trim() === '' ? undefined : control.value;
      }
      const node = h('div', { class: 'field' }, h('label', { for: id }, label), control, hint);
      return { ...given, node, read, focus: () => control.focus() };
    }

    function choiceForm({ requestId, request = {} }) {
      const id = nextId('q');
      const options = request.options || [];
      const wantsText = request.allowFreeform || request.display === 'text' || options.length === 0;
      const message = h('p', { id: `${id}-message`, class: 'form-message', role: 'alert' });
      const radios = options.map((option, i) => {
        const optionId = `${id}-option-${i}`;
        const hint = option.description
          ? h('span', { id: `${optionId}-hint`, class: 'hint' }, option.description) : null;
        const radio = h('input', { type: 'radio', id: optionId, name: `${id}-choice`, value: option.id,
          'aria-describedby': hint ? hint.id : null });
        return h('div', { class: `option option-${token(option.style || 'default')}` },
          radio, h('label', { for: optionId }, option.label ?? option.id), hint);
      });
      const text = wantsText
        ? h('input', { type: 'text', id: `${id}-text`, name: 'text', autocomplete: 'off' }) : null;
      const submit = h('button', { type: 'submit' }, 'Answer');
      const form = h('form', { class: 'question', dataset: { requestId }, novalidate: true },
        h('fieldset', { 'aria-describedby': message.id },
          h('legend', {}, request.prompt ?? requestId),
          radios.length ? h('div', { class: 'options' }, radios) : null,
          text && h('div', { class: 'field' }, h('label', { for: text.id }, 'Your answer'), text),
          message, submit));

      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        const choice = form.querySelector('input[type=radio]:checked');
        const answer = text ? text.value.trim() : '';
        const problem = options.length && !choice && !answer
          ? (text ? 'Choose one of the options or type an answer.' : 'Choose one of the options.')
          : !options.length && !answer ? 'Type your answer.' : '';
        message.textContent = problem;
        if (problem) {
          (form.querySelector('input[type=radio]') || text).focus();
          return;
        }
        const body = {};
        if (choice) body.optionId = choice.value;
        if (answer) body.text = answer;
        await post(submit, `${runPath(runId)}/questions/${encodeURIComponent(requestId)}`, body, 'Answer sent');
      });
      return form;
    }

    /** POSTs `body` to `path` from `button` (disabled meanwhile), says `done`, then refreshes. */
    async function post(button, path, body, done) {
      button.disabled = true;
      try {
        await api(path, { method: 'POST', body });
        clearError();
        announce(done);
      } catch (err) {
        showError(err);
      } finally {
        button.disabled = false;
        refresh();
      }
    }

    /** "Cancel run", which asks for a second click within 5 s instead of a confirm() dialog. */
    function cancelButton() {
      const button = h('button', { type: 'button', id: 'cancel-run', class: 'danger', hidden: true }, 'Cancel run');
      let armed = null;
      const disarm = () => {
        clearTimeout(armed);
        armed = null;
        button.textContent = 'Cancel run';
        button.classList.remove('armed');
      };
      button.addEventListener('click', async () => {
        if (!armed) {
          armed = setTimeout(disarm, 5000);
          button.textContent = 'Confirm cancel';
          button.classList.add('armed');
          announce('Press again within 5 seconds to cancel the run');
          return;
        }
        disarm();
        await post(button, `${runPath(runId)}/cancel`, { reason: 'cancelled from the inspector' }, 'Cancel requested');
      });
      const show = (visible) => {
        if (!visible) disarm();
        button.hidden = !visible;
      };
      return { button, show };
    }

    const closeStream = openStream('/v1/events?run=' + encodeURIComponent(runId), refresh);
    refresh();

    return {
      title,
      update(route) {
        if (route.at === at) return;
        at = route.at;
        refresh();
      },
      leave() {
        alive = false;
        clearTimeout(scrubTimer);
        closeStream();
      },
    };
  }

  /** A section labelled by its own heading. */
  function section(id, heading, ...content) {
    const headingId = `${id}-title`;
    return h('section', { id, 'aria-labelledby': headingId }, h('h3', { id: headingId }, heading), ...content);
  }

  // ---- Start ---------------------------------------------------------------------------------

  // The skip link focuses <main> without touching the hash, which belongs to the router.
  document.querySelector('.skip-link').addEventListener('click', (event) => {
    event.preventDefault();
    $('main').focus();
  });
  window.addEventListener('hashchange', () => route(true));
  setInterval(tickRelativeTimes, 15000);
  route(false);
})();
