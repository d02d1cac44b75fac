'use strict';
// The MCP Apps bridge, view side (io.modelcontextprotocol/ui, protocol
// 2026-01-26): JSON-RPC 2.0 over postMessage with the host (window.parent).
// Outside a host (the /view page) window.parent is the window itself and
// the page talks to the server it came from instead.
const $ = (s, el) => (el || document).querySelector(s);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k.nodeType ? k : String(k));
  return e;
};
const Bridge = (() => {
  const host = window.parent !== window ? window.parent : null;
  let seq = 0;
  const pending = new Map(), on = {};
  const send = (m) => host.postMessage(m, '*');
  const request = (method, params) => new Promise((resolve, reject) => {
    if (!host) return reject(new Error('no host'));
    const id = ++seq;
    pending.set(id, { resolve, reject });
    send({ jsonrpc: '2.0', id, method, params });
  });
  const notify = (method, params) => host && send({ jsonrpc: '2.0', method, params: params || {} });
  window.addEventListener('message', (e) => {
    if (!host || e.source !== host) return;
    const m = e.data;
    if (!m || m.jsonrpc !== '2.0') return;
    if (m.method === undefined && m.id !== undefined) {
      const p = pending.get(m.id);
      if (p) { pending.delete(m.id); m.error ? p.reject(Object.assign(new Error(m.error.message), { code: m.error.code })) : p.resolve(m.result); }
      return;
    }
    const h = on[m.method];
    if (m.id !== undefined) {
      if (!h && m.method !== 'ping' && m.method !== 'ui/resource-teardown') { send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'method not found: ' + m.method } }); return; }
      Promise.resolve(h ? h(m.params || {}) : {}).then((r) => send({ jsonrpc: '2.0', id: m.id, result: r || {} }));
    } else if (h) h(m.params || {});
  });
  let ctx = {};
  const applyContext = (c) => {
    ctx = Object.assign(ctx, c || {});
    if (ctx.theme) document.documentElement.dataset.theme = ctx.theme;
    const vars = ctx.styles && ctx.styles.variables;
    if (vars) for (const [k, v] of Object.entries(vars)) if (v) document.documentElement.style.setProperty(k, v);
  };
  on['ui/notifications/host-context-changed'] = applyContext;
  const start = async (name) => {
    if (!host) return null;
    const r = await request('ui/initialize', { appInfo: { name, version: '1.0.0' }, appCapabilities: {}, protocolVersion: '2026-01-26' });
    applyContext(r && r.hostContext);
    notify('ui/notifications/initialized', {});
    let last = '';
    const size = () => {
      const s = Math.ceil(document.documentElement.getBoundingClientRect().height);
      const w = Math.ceil(document.documentElement.scrollWidth);
      if (s + 'x' + w !== last) { last = s + 'x' + w; notify('ui/notifications/size-changed', { width: w, height: s }); }
    };
    new ResizeObserver(size).observe(document.body);
    size();
    return r;
  };
  const hostCaps = () => ctx;
  return { host, on, request, notify, start, context: () => ctx, hostCaps };
})();

// Tool results: the structured content, or (a host that passes only
// content) the JSON of the first text block, else null.
const structured = (res) => {
  if (!res) return null;
  if (res.structuredContent) return res.structuredContent;
  return null;
};
const resultText = (res) => ((res && res.content) || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// Rows of a read: the compact (json) or full form, or the text form parsed;
// each {rkey, text, layout, state, note, hasNote, mirror, author, readOnly,
// children, childCount, comments, invalid, detached}.
const normRow = (r) => {
  const o = Object.assign({}, r);
  if (!o.state && o.layout === 'todo') o.state = o.completedAt || o.done ? 'done' : 'open'; // done: a full search hit
  if (o.state && !o.layout) o.layout = 'todo'; // a compact search hit: state says it is a todo
  o.hasNote = !!(o.hasNote || o.note);
  o.children = (o.children || []).map(normRow);
  if (o.mirror) { o.mirror = Object.assign({}, o.mirror); o.mirror.rows = (o.mirror.rows || o.mirror.Rows || []).map(normRow); }
  return o;
};
const MARKS = [['[x] ', 'todo', 'done'], ['[ ] ', 'todo', 'open'], ['### ', 'h3'], ['## ', 'h2'], ['# ', 'h1'], ['``` ', 'codeBlock'], ['> ', 'quoteBlock'], ['↪ ', 'mirror']];
const parseText = (txt) => {
  const roots = [], stack = [], extra = [];
  let title = '';
  for (const line of String(txt || '').split('\n')) {
    if (!line.trim()) continue;
    if (line.startsWith('Outline: ') && !roots.length) { title = line.slice(9); continue; }
    const m = /^( *)- (.*) ·(\S+)$/.exec(line);
    if (!m) {
      const last = stack.length && stack[stack.length - 1].row;
      const n = /^ *> (.*)$/.exec(line);
      if (last && n) { last.note = (last.note ? last.note + '\n' : '') + n[1]; last.hasNote = true; } else if (last && /^ +/.test(line)) { (last.lines = last.lines || []).push(line.trim()); } else extra.push(line.trim());
      continue;
    }
    const depth = m[1].length / 2;
    let body = m[2];
    const row = { rkey: m[3], children: [] };
    for (const [p, layout, state] of MARKS) if (body.startsWith(p)) { body = body.slice(p.length); if (layout === 'mirror') row.mirror = { rows: [] }; else row.layout = layout; if (state) row.state = state; break; }
    let q;
    if ((q = / \(\+(\d+)\)$/.exec(body))) { row.childCount = +q[1]; row.hidden = +q[1]; body = body.slice(0, q.index); }
    if ((q = / \[(\d+) comment\(s\)\]$/.exec(body))) { row.commentCount = +q[1]; body = body.slice(0, q.index); }
    if (/ \[invalid record\]$/.test(body)) { row.invalid = 'invalid record'; body = body.slice(0, -17); }
    if (/ \[note\]$/.test(body)) { row.hasNote = true; body = body.slice(0, -7); }
    if ((q = / \[by (\S+), read-only\]$/.exec(body))) { row.author = q[1]; row.readOnly = true; body = body.slice(0, q.index); } else if (/ \[mirrored, read-only\]$/.test(body)) { row.readOnly = true; body = body.slice(0, -22); }
    if (row.mirror) {
      const mm = /^(?:"(.*)" )?\(?mirror of (\S+?)(?:, read-only)?\)?(?: \(original missing\))?$/.exec(body);
      if (mm) { row.mirror.original = mm[2]; body = mm[1] === undefined ? '' : (() => { try { return JSON.parse('"' + mm[1] + '"'); } catch (e) { return mm[1]; } })(); if (/original missing/.test(m[2])) row.mirror.missing = true; }
    }
    row.text = body;
    while (stack.length && stack[stack.length - 1].depth >= depth) stack.pop();
    if (stack.length) stack[stack.length - 1].row.children.push(row); else roots.push(row);
    stack.push({ depth, row });
  }
  return { title, roots, extra };
};

// searchRows flattens a search result's hits: the compact tree (an entry is
// a hit, or an ancestor [text, entries...]) or fields=full's flat list
// (breadcrumb); each row gets its path.
const searchRows = (entries, path) => {
  const rows = [];
  for (const h of entries || []) {
    if (Array.isArray(h)) { rows.push(...searchRows(h.slice(1), path.concat([String(h[0])]))); continue; }
    const p = Array.isArray(h.breadcrumb) ? h.breadcrumb : path;
    rows.push(normRow(Object.assign({ path: p.join(' › ') }, h)));
  }
  return rows;
};

// toRows gives {title, root, rows, notices, truncated, next} for a read or
// search result.
const toRows = (sc, text) => {
  const out = { title: '', root: null, rows: [], notices: [], truncated: false, next: '' };
  if (!sc) sc = {};
  out.notices = (sc.notices || []).slice();
  out.truncated = !!sc.truncated;
  out.next = sc.next || (sc.cursor ? 'more rows follow: call read_outline with cursor=' + sc.cursor : '');
  if (sc.outline && sc.outline.title) out.title = sc.outline.title;
  if (Array.isArray(sc.hits)) {
    out.search = true;
    out.rows = searchRows(sc.hits, []);
    return out;
  }
  if (Array.isArray(sc.nodes)) {
    out.root = sc.root ? normRow(sc.root) : null;
    out.rows = sc.nodes.map(normRow);
    return out;
  }
  const t = parseText(sc.text !== undefined ? sc.text : text);
  out.title = out.title || t.title;
  out.rows = t.roots;
  if (t.extra.length) out.notices.push(...t.extra);
  if (sc.root && sc.text !== undefined && out.rows.length === 1 && out.rows[0].rkey === (sc.root.rkey || '')) { out.root = out.rows[0]; out.rows = out.root.children; }
  if (sc.text === undefined && sc.markdown !== undefined) out.notices.push('this result is Markdown or OPML; the view shows the bullets it could read from the text');
  return out;
};

// kidsOf is what a row shows under it: a mirror's rows of its original, or
// its children.
const kidsOf = (r) => (r.mirror && r.mirror.rows && r.mirror.rows.length ? r.mirror.rows : r.children || []);

// renderTree renders rows as a collapsible list; ask(row) is called when a
// bullet's text is clicked.
const renderTree = (rows, ask) => {
  const ul = el('ul', { class: 'tree' });
  for (const r of rows) {
    const kids = kidsOf(r);
    const cls = ['row', r.layout || '', r.state === 'done' ? 'done' : '', kids.length || r.childCount ? 'parent' : '', r.mirror ? 'mirror' : '', r.display === 'collapsed' && kids.length ? 'collapsed' : ''].join(' ').replace(/ +/g, ' ').trim();
    const tog = kids.length ? el('button', { class: 'tog', title: 'fold', 'aria-label': 'fold', onclick: (e) => { const li = e.target.closest('li'); li.classList.toggle('collapsed'); e.target.textContent = li.classList.contains('collapsed') ? '▸' : '▾'; } }, r.display === 'collapsed' ? '▸' : '▾') : el('span', { class: 'dot' }, r.layout === 'todo' ? '' : '•');
    const text = r.mirror ? (r.text || r.mirror.text || 'mirror of ' + (r.mirror.original || '?')) : r.text;
    const line = el('div', { class: 'line' }, tog,
      r.layout === 'todo' ? el('span', { class: 'box', role: 'checkbox', 'aria-checked': r.state === 'done' ? 'true' : 'false' }) : null,
      el('span', { class: 'txt', title: 'ask about this bullet in the chat', onclick: () => ask && ask(r) }, text || '(empty)'),
      r.mirror ? el('span', { class: 'tag mirror', title: r.mirror.original || '' }, r.mirror.missing ? 'mirror · original missing' : 'mirror · read-only') : null,
      r.author ? el('span', { class: 'tag contrib', title: r.author }, 'contribution · ' + r.author.slice(0, 20)) : (r.readOnly && !r.mirror ? el('span', { class: 'tag' }, 'read-only') : null),
      r.hasNote && !r.note ? el('span', { class: 'tag' }, 'note') : null,
      r.commentCount || (r.comments && r.comments.length) ? el('span', { class: 'tag' }, (r.commentCount || r.comments.length) + ' comment(s)') : null,
      r.invalid ? el('span', { class: 'tag', title: r.invalid }, 'invalid record') : null,
      r.detached ? el('span', { class: 'tag', title: r.detached }, 'detached') : null,
      r.hidden || (!kids.length && r.childCount) ? el('span', { class: 'tag', title: 'children below the read\'s depth' }, '+' + (r.hidden || r.childCount)) : null,
      r.path ? el('span', { class: 'muted small' }, 'in ' + r.path) : null,
      el('span', { class: 'key' }, '·' + r.rkey));
    const li = el('li', { class: cls, 'data-rkey': r.rkey, 'data-layout': r.layout || '', 'data-state': r.state || '' }, line);
    if (r.note) li.append(el('div', { class: 'note' }, r.note));
    if (r.mirror && r.mirror.cut) li.append(el('div', { class: 'note' }, 'mirror cut: ' + r.mirror.cut));
    if (kids.length) li.append(renderTree(kids, ask));
    ul.append(li);
  }
  return ul;
};
const notices = (list, cls) => (list || []).map((n) => el('div', { class: 'notice ' + (cls || '') }, n));
