// The cotal dashboard. Every string a peer wrote reaches the page through textContent
// (el() below), never innerHTML. A dashboard that needs a token has set it as an HttpOnly
// cookie when its URL was opened: every request below carries it, and no script sees it.
'use strict';
(function () {
  const GLYPH = { working: '●', waiting: '◐', idle: '○', offline: '⊘' };
  const state = { agents: new Map(), channels: new Map(), dms: [], meta: {}, view: { kind: 'monitor' }, feed: [],
    tasks: new Map(), claims: new Map(), teamError: '', runs: [], pauses: [], runsError: '' };
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  async function api(path) {
    const r = await fetch(path);
    const body = await r.json();
    if (!r.ok) throw new Error(path + ': ' + (body.reason || body.error || r.status));
    return body;
  }
  function nameOf(id) { const a = state.agents.get(id); return a ? a.name : id; }
  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm';
    return Math.floor(s / 3600) + 'h' + Math.floor((s % 3600) / 60) + 'm';
  }
  function note(text) { $('note').textContent = text || ''; }
  // plain shows a peer's control characters (a terminal escape in a task title) as
  // visible marks instead of passing them on, invisible, in the text.
  function plain(s) { return String(s || '').replace(/[\u0000-\u001f\u007f-\u009f]/g, '\ufffd'); }
  function until(ms) { return ms > Date.now() ? 'in ' + ago(ms - Date.now()) : 'now'; }

  // --- data ----------------------------------------------------------------------
  async function loadAll() {
    try {
      const [meta, roster, channels] = await Promise.all([api('/api/meta'), api('/api/roster'), api('/api/channels')]);
      state.meta = meta;
      $('space').textContent = 'space ' + meta.space;
      state.agents = new Map(roster.agents.map((a) => [a.id, a]));
      state.channels = new Map(channels.channels.map((c) => [c.name, c]));
      if (meta.dmVisible) state.dms = (await api('/api/dms')).messages;
      const [tasks, claims] = await Promise.all([api('/api/tasks'), api('/api/claims')]);
      state.tasks = new Map(tasks.tasks.map((t) => [t.id, t]));
      state.claims = new Map(claims.claims.map((c) => [c.holder + ' ' + c.path, c]));
      state.teamError = tasks.readError || claims.readError || '';
      // The recent activity, merged with what the live feed brought meanwhile.
      const byID = new Map((await api('/api/activity')).messages.map((m) => [m.id, m]));
      for (const m of state.feed) byID.set(m.id, m);
      state.feed = [...byID.values()].sort((a, b) => a.ts - b.ts).slice(-300);
      if (state.view.kind === 'monitor') showMessages(state.feed);
      note(meta.historyError ? 'history: ' + meta.historyError : '');
      renderAll();
      if (state.view.kind === 'channel') await showChannel(state.view.name);
    } catch (e) {
      note('stale: ' + e.message); // keep the last good values
    }
  }

  function onRoster(a) {
    state.agents.set(a.id, a);
    renderRoster(); renderNeeds(); renderTiles(); renderTargets();
    if (state.view.kind === 'graph') renderGraph();
    if (state.view.kind === 'agent' && state.view.id === a.id) showAgent(a.id);
  }

  function onMessage(m) {
    if (m.kind === 'channel') {
      let c = state.channels.get(m.channel);
      if (!c) { c = { name: m.channel, messages: 0, seen: 0, members: [] }; state.channels.set(m.channel, c); }
      c.messages++; c.seen++;
      if (!c.members.includes(m.from)) c.members.push(m.from);
      const a = state.agents.get(m.from);
      if (a && !a.channels.includes(m.channel)) a.channels.push(m.channel);
      renderChannels();
    } else {
      state.dms.push(m);
      renderDMPeers();
    }
    state.feed.push(m);
    if (state.feed.length > 300) state.feed.shift();
    const v = state.view;
    if (v.kind === 'monitor' || (v.kind === 'channel' && m.channel === v.name) ||
        (v.kind === 'dm' && m.kind !== 'channel' && (m.from === v.id || m.to === v.id))) {
      appendMessage(m);
    }
    flash(m);
  }

  function onTask(t, gone) {
    if (gone) state.tasks.delete(t.id); else state.tasks.set(t.id, t);
    renderTasks();
  }
  function onClaim(c, gone) {
    const k = c.holder + ' ' + c.path;
    if (gone) state.claims.delete(k); else state.claims.set(k, c);
    renderClaims();
  }

  // --- rendering -----------------------------------------------------------------
  function agentRow(a, extra) {
    const li = el('li', 's-' + a.state + (a.state === 'waiting' ? ' waiting' : ''));
    li.dataset.id = a.id;
    li.dataset.state = a.state;
    li.title = a.id;
    li.appendChild(el('span', 'glyph', GLYPH[a.state] || '?'));
    li.appendChild(el('span', 'name', a.name));
    if (a.role) li.appendChild(el('span', 'role', a.role));
    if (a.harness) li.appendChild(el('span', 'harness', a.harness));
    if (a.state === 'waiting') li.appendChild(el('span', 'tag', 'waiting'));
    if (extra) li.appendChild(el('span', 'count', extra));
    if (a.activity) li.appendChild(el('span', 'activity', a.activity));
    li.tabIndex = 0;
    li.addEventListener('click', () => showAgent(a.id));
    li.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') showAgent(a.id); });
    return li;
  }
  const RANK = { working: 0, waiting: 1, idle: 2, offline: 3 };
  function sortedAgents() {
    return [...state.agents.values()].sort((a, b) =>
      ((a.kind === 'agent') === (b.kind === 'agent') ? 0 : (a.kind === 'agent' ? -1 : 1)) ||
      (RANK[a.state] - RANK[b.state]) || a.name.localeCompare(b.name));
  }
  function renderRoster() { $('roster').replaceChildren(...sortedAgents().map((a) => agentRow(a))); }
  function waiting() {
    // Every peer waiting for a person, of any kind (an agent, a person's session).
    return [...state.agents.values()].filter((a) => a.state === 'waiting')
      .sort((a, b) => (a.statusSince || a.seen) - (b.statusSince || b.seen));
  }
  function renderNeeds() {
    const w = waiting();
    const now = Date.now();
    // A pause's row is kept across renders, so an answer being typed is not wiped.
    const keep = new Set(state.pauses.map((p) => p.runId + ' ' + p.step));
    for (const k of [...pauseEls.keys()]) if (!keep.has(k)) pauseEls.delete(k);
    $('needs').replaceChildren(...w.map((a) => agentRow(a, ago(now - (a.statusSince || a.seen)))), ...state.pauses.map(pauseRow));
    if (w.length === 0 && state.pauses.length === 0) $('needs').appendChild(el('li', 'note', 'nobody is waiting'));
  }

  // --- workflow runs: a checkpoint waiting for a person is answered here as with
  // `cotal run answer` (the value is JSON; the server checks it and refuses as the CLI does)
  async function loadRuns() {
    try {
      const [runs, pend] = await Promise.all([api('/api/runs'), api('/api/runs/pending')]);
      state.runs = runs.runs; state.pauses = pend.pending; state.runsError = '';
    } catch (e) { state.runsError = e.message; }
    renderNeeds(); renderRuns();
  }
  const pauseEls = new Map();
  function pauseDetail(p) {
    const bits = ['run ' + p.runId.slice(0, 12) + '…', p.step];
    if (p.since) bits.push('waiting ' + ago(Date.now() - p.since));
    if (p.deadline) bits.push('expires ' + until(p.deadline));
    return plain(bits.join(' · '));
  }
  function pauseRow(p) {
    const k = p.runId + ' ' + p.step;
    const had = pauseEls.get(k);
    if (had) { had.querySelector('.detail').textContent = pauseDetail(p); return had; }
    const li = el('li', 'pause');
    pauseEls.set(k, li);
    li.dataset.run = p.runId;
    li.dataset.step = p.step;
    li.appendChild(el('span', 'title', plain(p.asks || p.step)));
    li.appendChild(el('span', 'detail', pauseDetail(p)));
    const form = el('form', 'answer');
    const input = el('input');
    input.placeholder = 'answer as JSON, e.g. "yes" or {"issue":42}';
    input.setAttribute('aria-label', 'answer to ' + p.step);
    const send = el('button', '', 'Answer');
    send.type = 'submit';
    const status = el('span', 'note');
    form.append(input, send, status);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      let value;
      try { value = JSON.parse(input.value); } catch (err) { status.textContent = 'not JSON: a bare string needs its quotes, "yes"'; return; }
      status.textContent = 'answering…';
      try {
        const r = await fetch('/api/runs/' + encodeURIComponent(p.runId) + '/answer', { method: 'POST',
          headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ step: p.step, value }) });
        const res = await r.json();
        if (!r.ok) throw new Error(res.reason || res.error);
        status.textContent = 'answered';
        setTimeout(loadRuns, 1000);
      } catch (err) { status.textContent = 'not answered: ' + err.message; }
    });
    li.appendChild(form);
    return li;
  }
  function renderRuns() {
    const rows = state.runs.slice().reverse().map((r) => {
      const li = el('li', 'run r-' + (r.revoked ? 'revoked' : r.state || 'none'));
      li.dataset.run = r.runId;
      li.appendChild(el('span', 'status', r.revoked ? 'revoked' : r.state || '(no status)'));
      li.appendChild(el('span', 'title', r.runId));
      const bits = [];
      if (r.holder) bits.push('held by ' + r.holder);
      if (r.journalHigh !== undefined) bits.push('journal #' + r.journalHigh);
      if (r.startedAt) bits.push('started ' + ago(Date.now() - r.startedAt) + ' ago');
      li.appendChild(el('span', 'detail', plain(bits.join(' · '))));
      li.addEventListener('click', () => showRun(r.runId));
      return li;
    });
    if (rows.length === 0) rows.push(el('li', 'note', state.runsError ? 'not read: ' + state.runsError : 'no workflow runs'));
    $('runs').replaceChildren(...rows);
  }
  async function showRun(id) {
    setView({ kind: 'run', id }, 'Run ' + id);
    $('detail').removeAttribute('hidden');
    try {
      const v = await api('/api/runs/' + encodeURIComponent(id) + '/journal');
      const dl = el('dl');
      const row = (k, val) => { if (val !== undefined && val !== '') { dl.appendChild(el('dt', '', k)); dl.appendChild(el('dd', '', plain(val))); } };
      if (v.status) { row('state', v.status.state); row('holder', v.status.holder); row('epoch', v.status.epoch); }
      const ol = el('ol', 'journal');
      for (const j of v.journal) {
        const text = j.kind === 'activation' ? '#' + j.n + ' activation holder=' + j.holder + ' epoch=' + j.epoch + ' replayedTo=' + j.replayedTo
          : '#' + j.n + ' step ' + j.step + ' ' + j.outcome + (j.asks ? ' — asks ' + j.asks : '');
        ol.appendChild(el('li', j.kind, plain(text)));
      }
      $('detail').replaceChildren(dl, ol);
      $('messages').replaceChildren();
    } catch (e) { note('stale: ' + e.message); }
  }
  function renderTiles() {
    const n = { working: 0, waiting: 0, idle: 0, offline: 0 };
    for (const a of state.agents.values()) if (a.kind === 'agent' && a.state !== 'waiting') n[a.state in n ? a.state : 'offline']++;
    const w = waiting();
    n.waiting = w.length;
    for (const k in n) $('n-' + k).textContent = n[k];
    $('n-oldest').textContent = w.length ? ago(Date.now() - (w[0].statusSince || w[0].seen)) : '–';
  }
  function renderChannels() {
    const rows = [...state.channels.values()].sort((a, b) => a.name.localeCompare(b.name)).map((c) => {
      const li = el('li', state.view.kind === 'channel' && state.view.name === c.name ? 'sel' : '');
      li.dataset.channel = c.name;
      li.appendChild(el('span', 'name', '#' + c.name));
      li.appendChild(el('span', 'count', c.messages));
      li.addEventListener('click', () => showChannel(c.name));
      return li;
    });
    $('channels').replaceChildren(...rows);
    renderTargets();
  }
  function renderDMPeers() {
    const peers = new Map();
    for (const m of state.dms) for (const id of [m.from, m.to || '']) if (id) peers.set(id, (peers.get(id) || 0) + 1);
    const rows = [...peers.entries()].sort((a, b) => nameOf(a[0]).localeCompare(nameOf(b[0]))).map(([id, n]) => {
      const li = el('li');
      li.appendChild(el('span', 'name', nameOf(id)));
      li.appendChild(el('span', 'count', n));
      li.addEventListener('click', () => showDMs(id));
      return li;
    });
    if (!state.meta.dmVisible) rows.push(el('li', 'note', 'DMs hidden for this credential'));
    $('dmpeers').replaceChildren(...rows);
  }
  function renderTargets() {
    const sel = $('post-target');
    const keep = sel.value;
    const opts = [];
    for (const c of [...state.channels.keys()].sort()) { const o = el('option', '', '#' + c); o.value = 'c:' + c; opts.push(o); }
    for (const a of sortedAgents()) { const o = el('option', '', '@' + a.name); o.value = 'a:' + a.id; opts.push(o); }
    if (!state.channels.has('general')) { const o = el('option', '', '#general'); o.value = 'c:general'; opts.unshift(o); }
    sel.replaceChildren(...opts);
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  }
  function messageItem(m) {
    const li = el('li', 'msg');
    li.dataset.id = m.id;
    const meta = el('div', 'meta');
    meta.appendChild(el('span', 'badge', m.kind === 'channel' ? 'multicast' : m.kind === 'dm' ? 'unicast' : 'anycast'));
    meta.appendChild(el('span', 'from', m.fromName || nameOf(m.from)));
    let where = '';
    if (m.kind === 'channel') where = ' → #' + m.channel;
    else if (m.kind === 'dm') where = ' → ' + nameOf(m.to);
    else where = ' → role ' + m.role;
    meta.appendChild(el('span', 'where', where));
    meta.appendChild(el('span', 'time', ' ' + new Date(m.ts).toLocaleTimeString()));
    li.appendChild(meta);
    li.appendChild(el('div', 'text', m.text));
    return li;
  }
  function appendMessage(m) {
    const list = $('messages');
    const stick = list.scrollTop + list.clientHeight >= list.scrollHeight - 20;
    list.appendChild(messageItem(m));
    while (list.children.length > 500) list.removeChild(list.firstChild);
    if (stick) list.scrollTop = list.scrollHeight;
  }
  function setView(v, title) {
    state.view = v;
    $('title').textContent = title;
    // toggleAttribute, not .hidden: the graph is an SVG element, which has no .hidden.
    $('detail').toggleAttribute('hidden', v.kind !== 'agent' && v.kind !== 'run');
    $('graph').toggleAttribute('hidden', v.kind !== 'graph');
    $('messages').toggleAttribute('hidden', v.kind === 'graph');
    for (const li of document.querySelectorAll('#channels li')) li.classList.toggle('sel', v.kind === 'channel' && li.dataset.channel === v.name);
  }
  function showMessages(list) { $('messages').replaceChildren(...list.map(messageItem)); $('messages').scrollTop = $('messages').scrollHeight; }
  async function showChannel(name) {
    setView({ kind: 'channel', name }, '#' + name);
    const t = 'c:' + name;
    if ([...$('post-target').options].some((o) => o.value === t)) $('post-target').value = t;
    try {
      const h = await api('/api/channels/' + encodeURIComponent(name) + '/history');
      if (state.view.kind === 'channel' && state.view.name === name) showMessages(h.messages);
    } catch (e) { note('stale: ' + e.message); }
  }
  function showDMs(id) {
    setView({ kind: 'dm', id }, 'DMs with ' + nameOf(id));
    showMessages(state.dms.filter((m) => m.from === id || m.to === id));
  }
  function showAgent(id) {
    const a = state.agents.get(id);
    if (!a) return;
    setView({ kind: 'agent', id }, a.name);
    const dl = el('dl');
    const row = (k, v) => { if (v) { dl.appendChild(el('dt', '', k)); dl.appendChild(el('dd', '', v)); } };
    row('state', GLYPH[a.state] + ' ' + a.state);
    row('role', a.role); row('kind', a.kind); row('harness', a.harness); row('model', a.model);
    row('description', a.description); row('activity', a.activity);
    row('tags', (a.tags || []).join(', ')); row('channels', (a.channels || []).map((c) => '#' + c).join(' '));
    row('id', a.id);
    $('detail').replaceChildren(dl);
    const t = 'a:' + id;
    if ([...$('post-target').options].some((o) => o.value === t)) $('post-target').value = t;
    showMessages(state.feed.filter((m) => m.from === id || m.to === id));
  }
  function showMonitor() { setView({ kind: 'monitor' }, 'Monitor'); showMessages(state.feed); }

  // --- graph: channels on an inner ring, agents on an outer one, a wire per membership
  function renderGraph() {
    const g = $('graph');
    const chans = [...state.channels.keys()].sort();
    const agents = sortedAgents();
    const pos = new Map();
    chans.forEach((c, i) => { const t = (2 * Math.PI * i) / Math.max(1, chans.length); pos.set('c:' + c, [Math.cos(t) * 120, Math.sin(t) * 120]); });
    agents.forEach((a, i) => { const t = (2 * Math.PI * i) / Math.max(1, agents.length) + 0.3; pos.set('a:' + a.id, [Math.cos(t) * 250, Math.sin(t) * 220]); });
    const nodes = [];
    for (const a of agents) for (const c of a.channels || []) {
      const p = pos.get('a:' + a.id), q = pos.get('c:' + c);
      if (p && q) { const l = svg('line', { x1: p[0], y1: p[1], x2: q[0], y2: q[1] }); l.dataset.edge = a.id + '|' + c; nodes.push(l); }
    }
    for (const c of chans) {
      const [x, y] = pos.get('c:' + c);
      nodes.push(svg('circle', { cx: x, cy: y, r: 16, class: 'hub' }));
      const t = svg('text', { x, y: y + 30 }); t.textContent = '#' + c; nodes.push(t);
    }
    for (const a of agents) {
      const [x, y] = pos.get('a:' + a.id);
      const o = svg('circle', { cx: x, cy: y, r: 10, class: 'orb s-' + a.state }); o.dataset.agent = a.id; nodes.push(o);
      const t = svg('text', { x, y: y + 24 }); t.textContent = a.name; nodes.push(t);
    }
    g.replaceChildren(...nodes);
  }
  function flash(m) {
    if (state.view.kind !== 'graph') return;
    if (m.kind === 'channel' && !document.querySelector('#graph line[data-edge="' + CSS.escape(m.from + '|' + m.channel) + '"]')) renderGraph();
    const hot = [];
    if (m.kind === 'channel') {
      for (const l of document.querySelectorAll('#graph line')) if (l.dataset.edge.endsWith('|' + m.channel)) hot.push(l);
    }
    for (const o of document.querySelectorAll('#graph circle.orb')) if (o.dataset.agent === m.from || o.dataset.agent === m.to) hot.push(o);
    for (const e of hot) e.classList.add('hot');
    setTimeout(() => { for (const e of hot) e.classList.remove('hot'); }, 700);
  }

  // --- the task board and the file claims: who holds what ------------------------
  const FINISHED = { done: true, failed: true, cancelled: true };
  function renderTasks() {
    const f = $('task-filter').value;
    const shown = [...state.tasks.values()].filter((t) => f === 'all' || (f === 'unfinished' ? !FINISHED[t.status] : t.status === f))
      .sort((a, b) => b.updated - a.updated);
    const now = Date.now();
    const rows = shown.map((t) => {
      const li = el('li', 'task t-' + t.status);
      li.dataset.id = t.id;
      li.dataset.status = t.status;
      li.appendChild(el('span', 'status', t.status));
      li.appendChild(el('span', 'title', plain(t.title)));
      const who = t.holder ? 'held by ' + nameOf(t.holder) : t.assignee ? 'for ' + nameOf(t.assignee) : 'unheld';
      const bits = [t.id, who];
      if (t.role) bits.push('role ' + t.role);
      bits.push('updated ' + ago(now - t.updated) + ' ago');
      if (t.leaseUntil) bits.push('lease ' + until(t.leaseUntil));
      li.appendChild(el('span', 'detail holder', plain(bits.join(' · '))));
      if (t.note) li.appendChild(el('span', 'detail', plain(t.note)));
      li.title = 'created by ' + nameOf(t.creator) + (t.lapsed ? '; the claim of ' + nameOf(t.lapsed) + ' lapsed' : '');
      return li;
    });
    if (rows.length === 0) rows.push(el('li', 'note', state.teamError ? 'not read: ' + state.teamError : 'no ' + (f === 'all' ? '' : f + ' ') + 'tasks'));
    $('tasks').replaceChildren(...rows);
  }
  function renderClaims() {
    const now = Date.now();
    const rows = [...state.claims.values()].filter((c) => c.expires > now)
      .sort((a, b) => a.path.localeCompare(b.path) || a.holder.localeCompare(b.holder)).map((c) => {
        const li = el('li', 'claim' + (c.exclusive ? ' exclusive' : ''));
        li.dataset.path = c.path;
        li.dataset.holder = c.holder;
        li.appendChild(el('span', 'path', plain(c.path)));
        li.appendChild(el('span', 'tag', c.exclusive ? 'exclusive' : 'shared'));
        const bits = [c.name ? c.name + ' (' + c.holder + ')' : nameOf(c.holder), 'since ' + ago(now - c.since) + ' ago', 'expires ' + until(c.expires)];
        li.appendChild(el('span', 'detail holder', plain(bits.join(' · '))));
        if (c.reason) li.appendChild(el('span', 'detail reason', plain(c.reason)));
        return li;
      });
    if (rows.length === 0) rows.push(el('li', 'note', state.teamError ? 'not read: ' + state.teamError : 'no file claims'));
    $('claims').replaceChildren(...rows);
  }

  function renderAll() { renderRoster(); renderNeeds(); renderTiles(); renderChannels(); renderDMPeers(); renderTasks(); renderClaims(); if (state.view.kind === 'graph') renderGraph(); }

  // --- live feed -------------------------------------------------------------------
  function connect() {
    const es = new EventSource('/feed');
    es.onopen = () => { $('live').textContent = 'live'; $('live').classList.remove('off'); };
    es.onerror = () => { $('live').textContent = 'reconnecting'; $('live').classList.add('off'); };
    es.addEventListener('snapshot', loadAll);
    es.addEventListener('reset', loadAll);
    es.addEventListener('roster', (e) => onRoster(JSON.parse(e.data).agent));
    es.addEventListener('message', (e) => onMessage(JSON.parse(e.data).message));
    es.addEventListener('task', (e) => { const ev = JSON.parse(e.data); onTask(ev.task, ev.gone); });
    es.addEventListener('claim', (e) => { const ev = JSON.parse(e.data); onClaim(ev.claim, ev.gone); });
  }

  // --- posting ---------------------------------------------------------------------
  $('post').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = $('post-text').value;
    const target = $('post-target').value;
    if (!text.trim() || !target) return;
    const body = target.startsWith('c:') ? { channel: target.slice(2), text } : { to: target.slice(2), text };
    $('post-status').textContent = 'sending…';
    try {
      const r = await fetch('/api/post', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      const res = await r.json();
      if (!r.ok) throw new Error(res.reason || res.error);
      $('post-text').value = '';
      $('post-status').textContent = 'sent';
    } catch (err) { $('post-status').textContent = 'not sent: ' + err.message; }
  });
  $('show-graph').addEventListener('click', () => { setView({ kind: 'graph' }, 'Graph'); renderGraph(); });
  document.querySelector('.brand').addEventListener('click', showMonitor);
  $('task-filter').addEventListener('change', renderTasks);
  setInterval(() => { renderNeeds(); renderTiles(); renderTasks(); renderClaims(); }, 5000); // ages move on
  setInterval(loadRuns, 5000); // runs have no feed event: read them again
  loadRuns();
  connect();
})();
