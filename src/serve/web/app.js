// The Vis web view: one page over the sessions API. Everything shown comes from the model,
// blocks or files and is untrusted, so the page builds DOM nodes and text nodes only: no
// HTML parsing of strings, no inline handlers. Links are checked to be http(s) or mailto.
'use strict';
(() => {
  const COLLAPSE_LINES = 8;
  const POLL_MS = 3000;

  const state = {
    sessions: [],
    current: null, // the selected session's id
    detail: null, // the last GET /api/sessions/{id} of it
    lives: new Map(), // session id -> the view of a turn streaming in this page
    needLogin: false,
  };

  // ---- DOM helpers -------------------------------------------------------------------

  const $ = (sel) => document.querySelector(sel);

  function append(node, children) {
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (/^on/i.test(k)) throw new Error('no inline handlers');
      if (k === 'class') node.setAttribute('class', v);
      else if (k === 'text') node.textContent = v;
      else node.setAttribute(k, String(v));
    }
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    return append(node, children);
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    setAttrs(node, attrs);
    return append(node, children);
  }

  const fmt = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'));
  const enc = encodeURIComponent;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function short(n) {
    if (n >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
    if (n >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
    return String(Math.round(n));
  }

  function clock(ms) {
    if (!ms) return '';
    const d = new Date(ms);
    const now = new Date();
    const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    return d.toDateString() === now.toDateString() ? t : `${d.toLocaleDateString()} ${t}`;
  }

  const plural = (n, word) => `${fmt(n)} ${word}${n === 1 ? '' : 's'}`;

  const badge = (text, cls) => el('span', { class: `badge ${cls || text}` }, text);

  function tokens(input, cached, output) {
    return el('span', { class: 'tokens' },
      el('span', {}, 'in ', el('b', {}, fmt(input))),
      el('span', {}, 'cached ', el('b', {}, fmt(cached))),
      el('span', {}, 'out ', el('b', {}, fmt(output))));
  }

  // ---- the API, with the login cookie (HttpOnly: this script never sees it) -----------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function request(method, path, body, headers) {
    const h = Object.assign({}, headers);
    const init = { method, headers: h, cache: 'no-store', credentials: 'same-origin' };
    if (body !== undefined) {
      h['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      setConn(`cannot reach the server (${e.message})`, true);
      throw new ApiError(0, 'network', `cannot reach the server: ${e.message}`);
    }
    if (resp.status === 401) {
      askLogin(LOGIN_HELP);
      throw new ApiError(401, 'unauthorized', 'not logged in');
    }
    setConn('', false);
    if (!resp.ok) {
      let j = null;
      try { j = await resp.json(); } catch (_) { /* not JSON */ }
      throw new ApiError(resp.status, (j && j.code) || 'http', (j && j.message) || `${resp.status} ${resp.statusText}`);
    }
    return resp;
  }

  const getJson = async (path) => (await request('GET', path)).json();

  function setConn(text, bad) {
    const c = $('#conn');
    c.textContent = text;
    c.className = bad ? 'error' : 'muted';
  }

  const LOGIN_HELP = 'Open the one-time login link vis serve printed when it started, or enter the server\'s token (in serve-token beside its database, or VIS_SERVE_TOKEN).';

  function askLogin(message) {
    state.needLogin = true;
    $('#login-message').textContent = message;
    $('#login').hidden = false;
    $('#token-input').focus();
  }

  // A used or unknown login link lands here with ?login=expired: say so, then tidy the address.
  function noteExpiredLogin() {
    const url = new URL(location.href);
    if (url.searchParams.get('login') === null) return;
    url.searchParams.delete('login');
    history.replaceState(null, '', url.pathname + url.search + url.hash);
    askLogin(`That login link is used up or unknown: each link works once, and only for the vis serve that printed it. ${LOGIN_HELP}`);
  }

  // ---- server-sent events over a streaming fetch (which resumes with Last-Event-ID) ---

  async function readSse(resp, onEvent) {
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let data = [];
    let id = null;
    const line = (l) => {
      if (l === '') {
        if (data.length) {
          let ev = null;
          try { ev = JSON.parse(data.join('\n')); } catch (_) { /* not an event */ }
          if (ev) onEvent(ev, id);
        }
        data = [];
        return;
      }
      if (l.startsWith(':')) return; // keep-alive comment
      const i = l.indexOf(':');
      const field = i < 0 ? l : l.slice(0, i);
      let value = i < 0 ? '' : l.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      for (;;) {
        const m = /\r\n|\n|\r/.exec(buf);
        // A lone \r at the end may be the first half of \r\n: wait for more.
        if (!m || (m[0] === '\r' && m.index === buf.length - 1)) break;
        line(buf.slice(0, m.index));
        buf = buf.slice(m.index + m[0].length);
      }
    }
    if (buf) line(buf);
    line('');
  }

  // ---- Markdown: a small renderer that builds nodes (text is never parsed as HTML) ----
  //
  // Linear in its input, whatever it holds: each kind of closing mark is looked for by a
  // scan that only moves forward (`seek`), a link's destination is parsed once per `]`, code
  // spans pair backtick runs of equal length through an index of the runs, and quotes and
  // lists nest at most MAX_DEPTH deep (deeper ones show as text). Nothing backtracks.

  const MAX_DEPTH = 8;

  function safeHref(raw) {
    try {
      const u = new URL(raw, location.href);
      return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
    } catch (_) {
      return null;
    }
  }

  const isSpace = (c) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v'
    || (c !== undefined && c > '\x7f' && /\s/.test(c));
  const isWord = (c) => c !== undefined && /\w/.test(c);
  const ESCAPABLE = new Set('\\`*_{}[]()#+-.!~<>|');
  const URL_PUNCT = new Set('.,;:!?\'"');

  // The first j >= from with isAt(j). Asked with `from`s that do not decrease (as the
  // renderer asks), each position of the text is tested once however often it is asked.
  function seek(text, isAt) {
    let found = -1;
    let scanned = 0;
    let last = 0;
    return (from) => {
      if (from < last) {
        // Not asked in order: a plain scan, remembering nothing.
        for (let j = from; j < text.length; j += 1) if (isAt(j)) return j;
        return -1;
      }
      last = from;
      if (found >= from) return found;
      for (let j = Math.max(from, scanned); j < text.length; j += 1) {
        if (isAt(j)) {
          found = j;
          scanned = j + 1;
          return j;
        }
      }
      scanned = text.length;
      return -1;
    };
  }

  // Backtick runs by length; `next(len, after)` is the next run of exactly that length
  // starting after `after` (asked with growing `after`).
  function backtickRuns(text) {
    const runs = new Map();
    for (let i = 0; i < text.length;) {
      if (text[i] !== '`') { i += 1; continue; }
      let j = i;
      while (text[j] === '`') j += 1;
      if (!runs.has(j - i)) runs.set(j - i, { at: [], next: 0 });
      runs.get(j - i).at.push(i);
      i = j;
    }
    return (len, after) => {
      const r = runs.get(len);
      if (!r) return -1;
      while (r.next < r.at.length && r.at[r.next] <= after) r.next += 1;
      return r.next < r.at.length ? r.at[r.next] : -1;
    };
  }

  // The end (after `)`) and address of `](dest "title")` whose `]` is at j, or null.
  function linkTail(text, j, nextQuote) {
    let k = j + 2;
    while (isSpace(text[k])) k += 1;
    if (text[k] === '<') k += 1;
    const start = k;
    for (;;) {
      const c = text[k];
      if (c === undefined || isSpace(c) || c === '<' || c === '>' || c === ')') break;
      if (c === '(') {
        let e = k + 1;
        while (e < text.length && !isSpace(text[e]) && !'()<>'.includes(text[e])) e += 1;
        if (text[e] !== ')') break;
        k = e + 1;
      } else k += 1;
    }
    if (k === start) return null;
    const url = text.slice(start, k);
    if (text[k] === '>') k += 1;
    let t = k;
    while (isSpace(text[t])) t += 1;
    if (t > k && text[t] === '"') {
      const q = nextQuote(t + 1);
      if (q >= 0) {
        let e = q + 1;
        while (isSpace(text[e])) e += 1;
        if (text[e] === ')') return { end: e + 1, url };
      }
    }
    while (isSpace(text[k])) k += 1;
    return text[k] === ')' ? { end: k + 1, url } : null;
  }

  // Inline Markdown: `code`, **strong**, ~~strike~~, *em* and _em_, [links](url), <autolinks>
  // and bare http(s) addresses, as nodes. Emphasis nests at most MAX_DEPTH deep.
  function inline(text, depth = 0) {
    // Text with nothing that could start a span (most emphasised words) is one text node.
    if (depth >= MAX_DEPTH || !/[\\`*_~[<]|https?:\/\//.test(text)) return text ? [text] : [];
    const out = [];
    let plain = [];
    const flush = () => { if (plain.length) { out.push(document.createTextNode(plain.join(''))); plain = []; } };
    const emit = (node) => { flush(); out.push(node); };
    const link = (href, children) => (href
      ? emit(el('a', { href, rel: 'noopener noreferrer nofollow', target: '_blank' }, children))
      : (flush(), out.push(...children))); // an unsafe link keeps only its text
    // The scans are made when first needed: most texts need few of them.
    const lazy = (make) => { let f = null; return (from) => (f = f || make())(from); };
    const closer = (mark) => lazy(() => seek(text, (j) => text.startsWith(mark, j) && !isSpace(text[j - 1])));
    const strongStar = closer('**');
    const strongUnder = closer('__');
    const strike = closer('~~');
    const emStar = lazy(() => seek(text, (j) => text[j] === '*' && text[j + 1] !== '*' && !isSpace(text[j - 1]) && text[j - 1] !== '*'));
    const emUnder = lazy(() => seek(text, (j) => text[j] === '_' && !isWord(text[j + 1]) && !isSpace(text[j - 1]) && text[j - 1] !== '_'));
    const labelEnd = lazy(() => seek(text, (j) => text[j] === ']' || text[j] === '\n'));
    const nextQuote = lazy(() => seek(text, (j) => text[j] === '"'));
    let tails = null;
    let runs = null;
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      const next = text[i + 1];
      if (c === '\\' && ESCAPABLE.has(next)) {
        plain.push(next);
        i += 2;
      } else if (c === '`') {
        let k = i;
        while (text[k] === '`') k += 1;
        runs = runs || backtickRuns(text);
        const close = runs(k - i, i);
        if (close < 0) {
          plain.push(text.slice(i, k)); // no run of the same length follows: literal
          i = k;
        } else {
          let code = text.slice(k, close).replace(/\n/g, ' ');
          if (code[0] === ' ' && code[code.length - 1] === ' ' && code.trim()) code = code.slice(1, -1);
          emit(el('code', {}, code));
          i = close + (k - i);
        }
      } else if ((c === '*' || c === '_' || c === '~') && next === c && text[i + 2] !== undefined && !isSpace(text[i + 2])) {
        const find = c === '*' ? strongStar : c === '_' ? strongUnder : strike;
        const close = find(i + 3);
        if (close >= 0) {
          emit(el(c === '~' ? 'del' : 'strong', {}, inline(text.slice(i + 2, close), depth + 1)));
          i = close + 2;
        } else {
          // Not closed: the second mark may still open emphasis.
          plain.push(c);
          i += 1;
        }
      } else if (c === '*' && next !== undefined && !isSpace(next) && next !== '*' && emStar(i + 2) >= 0) {
        const close = emStar(i + 2);
        emit(el('em', {}, inline(text.slice(i + 1, close), depth + 1)));
        i = close + 1;
      } else if (c === '_' && !isWord(text[i - 1]) && next !== undefined && !isSpace(next) && next !== '_' && emUnder(i + 2) >= 0) {
        const close = emUnder(i + 2);
        emit(el('em', {}, inline(text.slice(i + 1, close), depth + 1)));
        i = close + 1;
      } else if (c === '[' && labelEnd(i + 1) > i + 1 && text[labelEnd(i + 1)] === ']' && text[labelEnd(i + 1) + 1] === '(') {
        const j = labelEnd(i + 1);
        tails = tails || new Map();
        if (!tails.has(j)) tails.set(j, linkTail(text, j, nextQuote));
        const tail = tails.get(j);
        if (tail) {
          link(safeHref(tail.url), inline(text.slice(i + 1, j), depth + 1));
          i = tail.end;
        } else {
          plain.push(c);
          i += 1;
        }
      } else if (c === '<' && (text.startsWith('http://', i + 1) || text.startsWith('https://', i + 1))) {
        let e = i + 1;
        while (e < text.length && !isSpace(text[e]) && text[e] !== '<' && text[e] !== '>') e += 1;
        const scheme = text.startsWith('https://', i + 1) ? 8 : 7;
        if (text[e] === '>' && e > i + 1 + scheme) {
          const url = text.slice(i + 1, e);
          link(safeHref(url), [url]);
          i = e + 1;
        } else {
          plain.push(c);
          i += 1;
        }
      } else if (c === 'h' && (i === 0 || isSpace(text[i - 1]) || text[i - 1] === '(')
        && (text.startsWith('http://', i) || text.startsWith('https://', i))) {
        const scheme = text.startsWith('https://', i) ? 8 : 7;
        let e = i + scheme;
        while (e < text.length && !isSpace(text[e]) && !'<>()'.includes(text[e])) e += 1;
        while (e > i + scheme && URL_PUNCT.has(text[e - 1])) e -= 1;
        if (e - (i + scheme) >= 2) {
          const url = text.slice(i, e);
          link(safeHref(url), [url]);
          i = e;
        } else {
          plain.push(c);
          i += 1;
        }
      } else {
        // A run of characters that start nothing, in one piece.
        let e = i + 1;
        while (e < text.length && !'\\`*_~[<h'.includes(text[e])) e += 1;
        plain.push(text.slice(i, e));
        i = e;
      }
    }
    flush();
    return out;
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const QUOTE = /^ {0,3}>\s?(.*)$/;

  // `# Title ##` as { level, text }, or null.
  function heading(line) {
    const m = /^ {0,3}(#{1,6})\s/.exec(line);
    if (!m) return null;
    let text = line.slice(m[0].length).trim();
    let e = text.length;
    while (e > 0 && text[e - 1] === '#') e -= 1;
    // A closing run of #s goes when a space comes before it (`# C#` keeps its #).
    if (e === 0 || isSpace(text[e - 1])) text = text.slice(0, e).trimEnd();
    return { level: m[1].length, text };
  }

  // `---`, `* * *`, `___`: three or more of one mark and nothing but spaces.
  function isRule(line) {
    const m = /^ {0,3}([-*_])/.exec(line);
    if (!m) return false;
    let marks = 0;
    for (let k = m[0].length - 1; k < line.length; k += 1) {
      if (line[k] === m[1]) marks += 1;
      else if (!isSpace(line[k])) return false;
    }
    return marks >= 3;
  }

  // `|---|:--:|`: a table's delimiter row.
  function isTableRule(line) {
    let t = line.trim();
    if (t.startsWith('|')) t = t.slice(1);
    if (t.endsWith('|')) t = t.slice(0, -1);
    return t !== '' && t.split('|').every((c) => /^:?-+:?$/.test(c.trim()));
  }

  // The line closes a fence opened by `fence`: at most 3 spaces, at least as many of its
  // marks, then only spaces.
  function closesFence(line, fence) {
    let k = 0;
    while (k < 3 && line[k] === ' ') k += 1;
    const start = k;
    while (line[k] === fence[0]) k += 1;
    if (k - start < fence.length) return false;
    while (k < line.length && isSpace(line[k])) k += 1;
    return k === line.length;
  }

  function cells(line) {
    return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
  }

  // Block Markdown: fenced code, headings, tables, rules, quotes, lists, paragraphs. Quotes
  // and lists nest at most MAX_DEPTH deep; deeper lines are shown as paragraphs.
  function markdown(src, depth = 0) {
    const lines = src.replace(/\r\n?/g, '\n').split('\n');
    const frag = document.createDocumentFragment();
    let i = 0;
    while (i < lines.length) {
      const l = lines[i];
      let m;
      if (!l.trim()) {
        i += 1;
      } else if ((m = FENCE.exec(l))) {
        const fence = m[1];
        const lang = m[2].toLowerCase();
        const body = [];
        i += 1;
        while (i < lines.length && !closesFence(lines[i], fence)) {
          body.push(lines[i]);
          i += 1;
        }
        i += 1;
        const code = body.join('\n');
        const isPython = ['python', 'py', 'python3', 'pycon'].includes(lang);
        frag.append(el('pre', {}, el('code', { class: lang ? `lang-${lang.replace(/[^\w-]/g, '')}` : null }, isPython ? highlight(code) : code)));
      } else if ((m = heading(l))) {
        frag.append(el(`h${Math.min(6, m.level + 2)}`, {}, inline(m.text)));
        i += 1;
      } else if (l.includes('|') && i + 1 < lines.length && lines[i + 1].includes('-') && isTableRule(lines[i + 1])) {
        const head = cells(l);
        const table = el('table', {}, el('thead', {}, el('tr', {}, head.map((c) => el('th', {}, inline(c))))));
        const body = el('tbody');
        i += 2;
        while (i < lines.length && lines[i].includes('|') && lines[i].trim()) {
          body.append(el('tr', {}, cells(lines[i]).map((c) => el('td', {}, inline(c)))));
          i += 1;
        }
        table.append(body);
        frag.append(table);
      } else if (isRule(l)) {
        frag.append(el('hr'));
        i += 1;
      } else if (depth < MAX_DEPTH && QUOTE.test(l)) {
        const body = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i += 1; }
        frag.append(el('blockquote', {}, markdown(body.join('\n'), depth + 1)));
      } else if (depth < MAX_DEPTH && (m = ITEM.exec(l))) {
        const ordered = /\d/.test(m[2]);
        const indent = m[1].length;
        const list = el(ordered ? 'ol' : 'ul');
        if (ordered && parseInt(m[2], 10) !== 1) list.setAttribute('start', String(parseInt(m[2], 10)));
        while (i < lines.length) {
          const im = ITEM.exec(lines[i]);
          if (!im || im[1].length !== indent || /\d/.test(im[2]) !== ordered) break;
          const body = [im[3]];
          i += 1;
          // The item goes on while lines are indented deeper (nested lists, continuations).
          while (i < lines.length) {
            const next = lines[i];
            const deeper = next.length - next.trimStart().length > indent;
            if (next.trim() && deeper) { body.push(next.slice(Math.min(indent + 2, next.length - next.trimStart().length))); i += 1; continue; }
            if (!next.trim() && i + 1 < lines.length && lines[i + 1].trim() && lines[i + 1].length - lines[i + 1].trimStart().length > indent) { body.push(''); i += 1; continue; }
            break;
          }
          const li = el('li');
          const content = markdown(body.join('\n'), depth + 1);
          // A tight item is one paragraph: show it without the paragraph's margins.
          if (content.childNodes.length === 1 && content.firstChild.nodeName === 'P') append(li, [...content.firstChild.childNodes]);
          else li.append(content);
          list.append(li);
          if (i < lines.length && !lines[i].trim()) {
            const after = lines[i + 1];
            const im2 = after === undefined ? null : ITEM.exec(after);
            if (im2 && im2[1].length === indent) i += 1;
          }
        }
        frag.append(list);
      } else {
        const para = [];
        while (i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !heading(lines[i])
          && !QUOTE.test(lines[i]) && !(para.length && ITEM.test(lines[i])) && !isRule(lines[i])) {
          para.push(lines[i].trim());
          i += 1;
        }
        if (!para.length) { para.push(lines[i]); i += 1; }
        frag.append(el('p', {}, inline(para.join('\n'))));
      }
    }
    return frag;
  }

  // ---- Python highlighting: a small tokenizer --------------------------------------

  const PY_KEYWORDS = new Set(('and as assert async await break class continue def del elif else except finally for '
    + 'from global if import in is lambda nonlocal not or pass raise return try while with yield match case').split(' '));
  const PY_CONSTANTS = new Set(['True', 'False', 'None']);
  const PY_BUILTINS = new Set(('print len range open str int float bool list dict set tuple type isinstance enumerate '
    + 'zip map filter sorted reversed sum min max abs any all repr round super object iter next getattr setattr '
    + 'hasattr input format vars dir id hash Exception ValueError TypeError KeyError IndexError RuntimeError '
    + 'self cls cat patch sh grep ls find doc fold_session read_session session').split(' '));
  const PY_TOKEN = new RegExp([
    '(#[^\\n]*)', // 1 comment
    '((?:[rRbBuUfF]{1,2})?(?:"""[\\s\\S]*?(?:"""|$)|\'\'\'[\\s\\S]*?(?:\'\'\'|$)|"(?:[^"\\\\\\n]|\\\\[\\s\\S]|\\\\$)*(?:"|(?=\\n)|$)|\'(?:[^\'\\\\\\n]|\\\\[\\s\\S]|\\\\$)*(?:\'|(?=\\n)|$)))', // 2 string (an unclosed one ends with its line)
    '((?:0[xX][\\da-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|(?:\\d[\\d_]*\\.?[\\d_]*|\\.\\d[\\d_]*)(?:[eE][+-]?\\d+)?[jJ]?))', // 3 number
    '(@[A-Za-z_][\\w.]*)', // 4 decorator
    '([A-Za-z_\\u00c0-\\uffff][\\w\\u00c0-\\uffff]*)', // 5 name
  ].join('|'), 'y');

  function highlight(code) {
    const frag = document.createDocumentFragment();
    let plain = '';
    const flush = () => { if (plain) { frag.append(plain); plain = ''; } };
    const span = (cls, text) => { flush(); frag.append(el('span', { class: cls }, text)); };
    let prevName = '';
    let i = 0;
    while (i < code.length) {
      PY_TOKEN.lastIndex = i;
      const m = PY_TOKEN.exec(code);
      if (!m || m.index !== i || !m[0]) {
        plain += code[i];
        if (!/\s/.test(code[i])) prevName = '';
        i += 1;
        continue;
      }
      const t = m[0];
      if (m[1]) span('tok-com', t);
      else if (m[2]) span('tok-str', t);
      else if (m[3]) {
        // A digit inside a name was matched by the name branch; here it stands alone.
        span('tok-num', t);
      } else if (m[4]) span('tok-deco', t);
      else if (PY_KEYWORDS.has(t)) span('tok-kw', t);
      else if (PY_CONSTANTS.has(t)) span('tok-const', t);
      else if (prevName === 'def' || prevName === 'class') span('tok-fn', t);
      else if (PY_BUILTINS.has(t)) span('tok-builtin', t);
      else if (/^\s*\(/.test(code.slice(i + t.length, i + t.length + 8))) span('tok-fn', t);
      else plain += t;
      prevName = m[5] ? t : '';
      i += t.length;
    }
    flush();
    return frag;
  }

  // The renderer's functions, for the page's own tests (tests/it/web.rs run them on
  // pathological inputs): they build nodes from text and hold nothing else.
  Object.defineProperty(window, 'visRender', { value: Object.freeze({ markdown, inline, highlight }) });

  // ---- pieces of the transcript ------------------------------------------------------

  function outputBox(text) {
    const box = el('div', { class: 'output' });
    const pre = el('pre', { class: 'output-text' });
    box.append(pre);
    if (text === null || text === undefined) return box;
    if (text === '') {
      pre.textContent = '(no output)';
      pre.classList.add('none');
      return box;
    }
    const lines = text.replace(/\n$/, '').split('\n');
    if (lines.length <= COLLAPSE_LINES) {
      pre.textContent = text;
      return box;
    }
    const toggle = el('button', { type: 'button', class: 'link output-toggle' });
    let open = false;
    const draw = () => {
      pre.textContent = open ? text : `${lines.slice(0, COLLAPSE_LINES).join('\n')}\n…`;
      toggle.textContent = open ? 'collapse' : `show all ${lines.length} lines`;
      box.classList.toggle('collapsed', !open);
    };
    toggle.addEventListener('click', () => { open = !open; draw(); });
    draw();
    box.append(toggle);
    return box;
  }

  function wall(ms) {
    if (ms === null || ms === undefined) return '';
    return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
  }

  function blockCard(b) {
    const status = b.status || 'running';
    const head = el('div', { class: 'block-head' },
      el('span', { class: 'label' }, b.label || 'block'),
      status === 'running' ? el('span', { class: 'spinner', 'aria-hidden': 'true' }) : null,
      badge(status, `status ${status}`),
      el('span', { class: 'wall' }, wall(b.wall_ms)));
    const card = el('div', { class: 'block', 'data-status': status }, head);
    if (b.code !== undefined && b.code !== null) card.append(el('pre', { class: 'code' }, el('code', {}, highlight(b.code))));
    if (b.output !== undefined && b.output !== null) card.append(outputBox(b.output));
    return card;
  }

  function finishBlock(card, status, output, ms) {
    card.setAttribute('data-status', status);
    const head = card.querySelector('.block-head');
    const sp = head.querySelector('.spinner');
    if (sp) sp.remove();
    const b = head.querySelector('.status');
    b.textContent = status;
    b.className = `badge status ${status}`;
    head.querySelector('.wall').textContent = wall(ms);
    card.append(outputBox(output));
  }

  const userMsg = (text) => el('div', { class: 'msg user' }, text);
  const assistantMsg = (text) => el('div', { class: 'msg assistant' }, markdown(text));
  const notice = (text) => el('div', { class: 'notice' }, text);

  function turnHead(turn, status, at) {
    return el('div', { class: 'turn-head', 'data-turn': turn },
      el('span', {}, `Turn ${turn}`), status ? badge(status) : null, el('span', {}, clock(at)));
  }

  const RECEIPT_FIELDS = [
    ['selected', 'selected', (v) => (v || []).join(', ')],
    ['widened', 'widened to whole responses', (v) => (v ? 'yes' : 'no')],
    ['absorbed', 'absorbed folds', (v) => ((v && v.length) ? v.join(', ') : 'none')],
    ['tokens_removed', 'tokens removed', (v) => `~${fmt(v)}`],
    ['gist_tokens', 'gist tokens', fmt],
    ['estimated_net_tokens', 'estimated net saving', (v) => `~${fmt(v)}`],
    ['recache_tokens', 're-cached next request', (v) => `~${fmt(v)}`],
    ['fold_count', 'folds in this group', fmt],
    ['automatic', 'automatic', (v) => (v ? 'yes' : 'no')],
  ];

  function kv(rows) {
    const dl = el('dl', { class: 'kv' });
    for (const [k, v] of rows) dl.append(el('dt', {}, k), el('dd', {}, v));
    return dl;
  }

  function measurementOf(f) {
    const m = f.measurement && typeof f.measurement === 'object' ? f.measurement : null;
    return m && m.status ? m : { status: 'pending' };
  }

  function foldCard(fold, spanIndex, inner) {
    const m = measurementOf(fold);
    const span = (fold.spans || [])[spanIndex] || {};
    const first = spanIndex === 0;
    const summary = el('summary', {},
      el('span', { class: 'fold-tag' }, `fold ${fold.id}`),
      el('span', { class: 'fold-label' }, span.label || fold.key || ''),
      el('span', { class: 'fold-gist' }, first ? fold.gist : `also replaced; its gist is at ${(fold.spans[0] || {}).label || 'its first span'}`),
      fold.automatic ? badge('automatic', 'pending') : null,
      badge(m.status));
    const receipt = fold.receipt && typeof fold.receipt === 'object' ? fold.receipt : {};
    const rows = RECEIPT_FIELDS.filter(([k]) => k in receipt).map(([k, label, f]) => [label, f(receipt[k])]);
    const mrows = [['status', m.status]];
    if (m.status === 'measured') {
      mrows.push(['input before the fold', fmt(m.before_input_tokens)],
        ['input after the fold', fmt(m.after_input_tokens)],
        ['net reduction', `${fmt(m.net_reduction_tokens)} tokens`]);
    } else if (m.status === 'unavailable') {
      mrows.push(['reason', m.reason || 'unknown']);
    } else {
      mrows.push(['', 'measured when the next response arrives']);
    }
    if (m.folds && m.folds.length > 1) mrows.push(['group', `folds ${m.folds.join(', ')}`]);
    const body = el('div', { class: 'fold-body' },
      el('h4', {}, 'Receipt'), kv(rows),
      el('h4', {}, 'Measurement'), kv(mrows));
    if (inner.childNodes.length) {
      body.append(el('details', { class: 'fold-original' },
        el('summary', {}, 'original items (still stored, no longer sent)'), el('div', {}, inner)));
    }
    return el('details', { class: 'fold', 'data-fold': fold.id }, summary, body);
  }

  function parseAssistant(body) {
    try {
      const v = JSON.parse(body);
      if (v && Array.isArray(v.blocks)) return v.blocks;
    } catch (_) { /* plain text */ }
    return [{ type: 'text', text: body }];
  }

  function callCode(block) {
    if (block.name !== 'python_execution') return { code: `${block.name}(${block.arguments || ''})`, valid: false };
    try {
      const a = JSON.parse(block.arguments || '{}');
      if (a && typeof a.code === 'string') return { code: a.code, valid: true };
    } catch (_) { /* not JSON */ }
    return { code: block.arguments || '', valid: false };
  }

  // Renders stored history: turns, messages, blocks with their results, and active folds
  // in place of the items they replace.
  function transcript(d, skipTurn) {
    const root = document.createDocumentFragment();
    const iters = new Map((d.iterations || []).map((it) => [`${it.turn}/${it.iteration}`, it]));
    const turns = new Map((d.turns || []).map((t) => [t.turn, t]));
    const items = (d.history || []).filter((h) => h.turn !== skipTurn);
    const results = new Map();
    for (const h of items) if (h.kind === 'tool_result' && h.call_id) results.set(h.call_id, h);
    const referenced = new Set(items.filter((h) => h.kind === 'tool_result').map((h) => `${h.turn}/${h.iteration}`));
    const orphans = (d.iterations || []).filter((it) => it.turn !== skipTurn && !referenced.has(`${it.turn}/${it.iteration}`));
    const starts = new Map();
    for (const f of d.folds || []) {
      if (f.absorbed_by !== null && f.absorbed_by !== undefined) continue;
      (f.spans || []).forEach((sp, idx) => starts.set(sp.first_seq, { fold: f, idx, last: sp.last_seq }));
    }
    const shown = new Set();

    const item = (h, into, ctx) => {
      if (ctx.turn !== h.turn) {
        ctx.turn = h.turn;
        const t = turns.get(h.turn) || {};
        into.append(turnHead(h.turn, t.status, t.started_at));
      }
      if (h.kind === 'user') into.append(userMsg(h.body));
      else if (h.kind === 'notice') into.append(notice(h.body));
      else if (h.kind === 'assistant') {
        let text = '';
        const flushText = () => { if (text.trim()) into.append(assistantMsg(text)); text = ''; };
        for (const b of parseAssistant(h.body)) {
          if (b.type === 'text') text += (text ? '\n\n' : '') + (b.text || '');
          else if (b.type === 'reasoning' || b.type === 'thinking') {
            flushText();
            if (b.text || b.thinking) into.append(el('div', { class: 'msg reasoning' }, b.text || b.thinking));
          } else if (b.type === 'tool_call') {
            flushText();
            const r = results.get(b.id);
            const it = r ? iters.get(`${r.turn}/${r.iteration}`) : null;
            const { code, valid } = callCode(b);
            if (r) shown.add(r.seq);
            into.append(blockCard({
              label: r ? `t${r.turn}/i${r.iteration}` : 'call',
              code,
              status: r ? (r.status || (valid ? 'ok' : 'rejected')) : 'running',
              output: r ? r.body : null,
              wall_ms: it ? it.duration_ms : null,
            }));
          }
        }
        flushText();
      } else if (h.kind === 'tool_result' && !shown.has(h.seq)) {
        const it = iters.get(`${h.turn}/${h.iteration}`);
        into.append(blockCard({ label: `t${h.turn}/i${h.iteration}`, code: it ? it.code : null, status: h.status, output: h.body, wall_ms: it ? it.duration_ms : null }));
      }
    };

    const ctx = { turn: null };
    let oi = 0;
    const orphansBefore = (turn) => {
      while (oi < orphans.length && (turn === null || orphans[oi].turn < turn)) {
        const it = orphans[oi++];
        if (ctx.turn !== it.turn) {
          ctx.turn = it.turn;
          const t = turns.get(it.turn) || {};
          root.append(turnHead(it.turn, t.status, t.started_at));
        }
        root.append(blockCard({ label: `t${it.turn}/i${it.iteration}`, code: it.code, status: it.status, output: it.output, wall_ms: it.duration_ms }));
      }
    };
    let i = 0;
    while (i < items.length) {
      const h = items[i];
      orphansBefore(h.turn);
      const s = starts.get(h.seq);
      if (s) {
        const inner = document.createDocumentFragment();
        const innerCtx = { turn: null };
        while (i < items.length && items[i].seq <= s.last) { item(items[i], inner, innerCtx); i += 1; }
        root.append(foldCard(s.fold, s.idx, inner));
        continue;
      }
      item(h, root, ctx);
      i += 1;
    }
    orphansBefore(null);
    return root;
  }

  // ---- the chart: input tokens per request, cached part, where folds happened ---------

  // A round step for about four gridlines up to `v`.
  function niceStep(v) {
    const raw = Math.max(1, v / 4);
    const p = 10 ** Math.floor(Math.log10(raw));
    for (const k of [1, 2, 5]) if (k * p >= raw) return k * p;
    return 10 * p;
  }

  function chart(requests, folds) {
    const wrap = el('div', { class: 'chart' });
    if (!requests.length) {
      wrap.append(el('p', { class: 'muted' }, 'No model requests yet.'));
      return wrap;
    }
    const W = 760;
    const H = 210;
    const L = 46;
    const R = 10;
    const T = 16;
    const B = 30;
    const n = requests.length;
    const vals = requests.map((r) => (r.input_tokens === null || r.input_tokens === undefined ? r.estimate_tokens || 0 : r.input_tokens));
    const tick = niceStep(Math.max(1, ...vals));
    const max = tick * Math.ceil(Math.max(1, ...vals) / tick);
    const plotW = W - L - R;
    const plotH = H - T - B;
    const step = plotW / n;
    const bw = Math.max(1.5, Math.min(30, step * 0.72));
    const y = (v) => T + plotH - (v / max) * plotH;
    const s = svg('svg', { class: 'chart-svg', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'input tokens per model request' });
    for (let v = 0; v <= max; v += tick) {
      s.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }),
        svg('text', { class: 'axis-label', x: L - 6, y: y(v) + 3, 'text-anchor': 'end' }, short(v)));
    }
    let lastLabel = -Infinity;
    const ordinal = [];
    const perTurn = new Map();
    requests.forEach((r) => {
      const k = (perTurn.get(r.turn) || 0) + 1;
      perTurn.set(r.turn, k);
      ordinal.push(k);
    });
    requests.forEach((r, i) => {
      const x = L + i * step + (step - bw) / 2;
      const v = vals[i];
      const c = Math.min(v, r.cached_tokens || 0);
      const estimated = r.input_tokens === null || r.input_tokens === undefined;
      const g = svg('g', { class: `bar${estimated ? ' estimated' : ''}${r.error_kind ? ' failed' : ''}`, 'data-seq': r.seq },
        svg('title', {}, `request ${i + 1} (turn ${r.turn}, #${ordinal[i]})\ninput ${fmt(v)}${estimated ? ' (estimate)' : ''}, cached ${fmt(r.cached_tokens)}, output ${fmt(r.output_tokens)}${r.error ? `\nerror: ${r.error}` : ''}`),
        svg('rect', { class: 'input', x, y: y(v), width: bw, height: Math.max(0, y(0) - y(v)) }));
      if (c > 0) g.append(svg('rect', { class: 'cached', x, y: y(c), width: bw, height: y(0) - y(c) }));
      s.append(g);
      const cx = L + i * step + step / 2;
      if (ordinal[i] === 1 && cx - lastLabel > 26) {
        lastLabel = cx;
        s.append(svg('text', { class: 'axis-label', x: cx, y: H - B + 14, 'text-anchor': 'middle' }, `t${r.turn}`));
      }
    });
    // A fold made in block i of turn t comes before that turn's request i + 1.
    const marks = new Map();
    for (const f of folds) {
      let j = requests.findIndex((r, k) => r.turn === f.turn && ordinal[k] === f.iteration + 1);
      if (j < 0) j = requests.findIndex((r) => r.turn > f.turn);
      if (j < 0) j = n;
      if (!marks.has(j)) marks.set(j, []);
      marks.get(j).push(f.id);
    }
    for (const [j, ids] of marks) {
      const x = L + j * step - (j === n ? step * 0.15 : 0);
      s.append(svg('g', { class: 'fold-mark', 'data-folds': ids.join(',') },
        svg('title', {}, `${ids.length > 1 ? 'folds' : 'fold'} ${ids.join(', ')} before ${j < n ? `request ${j + 1}` : 'the next request'}`),
        svg('line', { x1: x, x2: x, y1: T - 4, y2: y(0) }),
        svg('text', { x: x + 3, y: T + 4 }, ids.map((id) => `f${id}`).join(' '))));
    }
    s.append(svg('text', { class: 'axis-label', x: W - R, y: H - 4, 'text-anchor': 'end' }, 'request →'));
    const inputs = vals.reduce((a, b) => a + b, 0);
    const cached = requests.reduce((a, r) => a + (r.cached_tokens || 0), 0);
    wrap.append(s, el('div', { class: 'legend' },
      el('span', {}, el('i', { class: 'l-input' }), 'input tokens'),
      el('span', {}, el('i', { class: 'l-cached' }), 'cached'),
      el('span', {}, el('i', { class: 'l-fold' }), 'fold'),
      el('span', { class: 'spacer' }),
      el('span', { class: 'chart-summary' }, `${plural(n, 'request')} · last ${fmt(vals[n - 1])} · peak ${fmt(Math.max(...vals))} · ${inputs ? Math.round((100 * cached) / inputs) : 0}% cached`)));
    return wrap;
  }

  // ---- the session view --------------------------------------------------------------

  function totals(d) {
    const t = { input: 0, cached: 0, output: 0, requests: 0, failed: 0 };
    for (const r of d.requests || []) {
      t.input += r.input_tokens || 0;
      t.cached += r.cached_tokens || 0;
      t.output += r.output_tokens || 0;
      t.requests += 1;
      if (r.error_kind) t.failed += 1;
    }
    return t;
  }

  function renderHead(d) {
    const t = totals(d);
    const m = d.model || {};
    const folds = (d.folds || []).length;
    const status = state.lives.has(d.session.id) ? 'running' : d.status;
    $('#session-head').replaceChildren(
      el('h2', {}, el('span', { class: 'sid' }, d.session.id), badge(status)),
      el('div', { class: 'meta' },
        `${(d.session.workspace_roots || []).join(', ')} · ${m.provider || '?'} ${m.model || ''} · `,
        tokens(t.input, t.cached, t.output),
        ` · ${plural(t.requests, 'request')}${t.failed ? ` (${t.failed} failed)` : ''} · ${plural(folds, 'fold')}`));
  }

  function renderDetail(d) {
    state.detail = d;
    const live = state.lives.get(d.session.id);
    renderHead(d);
    $('#chart').replaceChildren(chart(d.requests || [], d.folds || []));
    const running = (d.turns || []).find((t) => t.status === 'running');
    $('#transcript').replaceChildren(transcript(d, live && running ? running.turn : null));
    if (live) $('#transcript').append(live.el);
    if (!(d.turns || []).length && !live) $('#transcript').append(el('p', { class: 'muted' }, 'No turns yet: send a message below.'));
    updateComposer();
  }

  // A session's details, every page of turns (GET /api/sessions/{id} gives one page).
  async function getDetail(id) {
    let d = null;
    let from = 1;
    for (;;) {
      const page = await getJson(`/api/sessions/${enc(id)}?from_turn=${from}`);
      if (!d) d = page;
      else for (const k of ['turns', 'iterations', 'folds', 'history', 'requests']) d[k] = d[k].concat(page[k]);
      const next = page.page && page.page.next_turn;
      if (!next || next <= from) return d;
      from = next;
    }
  }

  async function openSession(id) {
    state.current = id;
    renderSessionList();
    $('#empty').hidden = !!id;
    $('#session-view').hidden = !id;
    if (!id) return;
    try {
      const d = await getDetail(id);
      if (state.current !== id) return;
      renderDetail(d);
      if (d.status === 'running' && !state.lives.has(id)) follow(id);
    } catch (e) {
      if (e.status === 401 || state.current !== id) return;
      $('#session-head').replaceChildren(el('p', { class: 'error' }, e.message));
      $('#chart').replaceChildren();
      $('#transcript').replaceChildren();
    }
  }

  const refreshCurrent = () => (state.current ? openSession(state.current) : undefined);

  // ---- the session list --------------------------------------------------------------

  function renderSessionList() {
    const list = $('#session-list');
    list.replaceChildren();
    if (!state.sessions.length) list.append(el('li', { class: 'empty' }, 'No sessions yet.'));
    for (const s of state.sessions) {
      const ws = (s.workspace || []).map((w) => w.split('/').filter(Boolean).pop() || w).join(', ');
      list.append(el('li', {}, el('a', {
        class: `session${s.id === state.current ? ' selected' : ''}`, href: `#${enc(s.id)}`, 'data-id': s.id,
      },
      el('div', { class: 'session-top' }, el('span', { class: 'sid' }, s.id), el('span', { class: 'spacer' }), badge(s.status)),
      el('div', { class: 'session-ws', title: (s.workspace || []).join(', ') }, ws),
      tokens(s.input_tokens, s.cached_tokens, s.output_tokens),
      el('div', { class: 'session-meta' }, `${plural(s.turns, 'turn')} · ${plural(s.requests, 'request')} · ${s.model || ''} · ${clock(s.updated_at)}`))));
    }
  }

  async function loadSessions() {
    const before = new Map(state.sessions.map((s) => [s.id, s]));
    state.sessions = await getJson('/api/sessions');
    renderSessionList();
    return before;
  }

  async function poll() {
    if (state.needLogin || document.hidden) return;
    let before;
    try { before = await loadSessions(); } catch (_) { return; }
    const id = state.current;
    if (!id || state.lives.has(id)) return;
    const now = state.sessions.find((s) => s.id === id);
    const was = before.get(id);
    if (now && (!was || was.status !== now.status || was.updated_at !== now.updated_at)) refreshCurrent();
  }

  // ---- a turn streaming in -----------------------------------------------------------

  function liveView(id, message) {
    const view = {
      id,
      el: el('div', { class: 'live' }),
      text: null, // the assistant text element being streamed into
      raw: '',
      attempt: [], // nodes of the current response, removed if it is retried
      blocks: new Map(),
      lastId: null,
      finished: false,
      status: '',
      turn: null,
      timer: 0,
    };
    view.el.append(turnHead('…', 'running'));
    if (message) view.el.append(userMsg(message));
    state.lives.set(id, view);
    const s = state.sessions.find((x) => x.id === id);
    if (s) s.status = 'running';
    renderSessionList();
    return view;
  }

  // Renders the streamed answer so far as Markdown, and how long that took.
  function renderLive(view) {
    const started = performance.now();
    view.text.replaceChildren(markdown(view.raw));
    view.renderMs = performance.now() - started;
  }

  // Renders the streamed text now (deltas are re-rendered as Markdown a moment later).
  function flushText(view) {
    clearTimeout(view.timer);
    view.timer = 0;
    if (view.text && view.text.className === 'msg assistant') renderLive(view);
    view.text = null;
  }

  function liveAppend(view, node) {
    view.el.append(node);
    if (view.id === state.current) node.scrollIntoView({ block: 'nearest' });
  }

  function setStatus(view, text) {
    view.status = text;
    if (view.id === state.current) $('#turn-status').textContent = text;
  }

  function onEvent(view, ev, follow) {
    switch (ev.type) {
      case 'turn_started': {
        view.turn = ev.turn;
        if (follow) {
          // Following a turn started elsewhere: the replay may hold earlier turns; show the last.
          view.el.replaceChildren();
          const t = ((state.detail && state.detail.turns) || []).find((x) => x.turn === ev.turn);
          view.el.append(turnHead(ev.turn, 'running'));
          if (t && t.user_text) view.el.append(userMsg(t.user_text));
          view.text = null;
        } else {
          view.el.replaceChild(turnHead(ev.turn, 'running'), view.el.firstChild);
        }
        setStatus(view, `turn ${ev.turn} started`);
        break;
      }
      case 'request_started':
        flushText(view);
        view.attempt = [];
        setStatus(view, `turn ${ev.turn} · request ${ev.n}…`);
        break;
      case 'text_delta':
      case 'reasoning_delta': {
        const cls = ev.type === 'text_delta' ? 'msg assistant' : 'msg reasoning';
        if (!view.text || view.text.className !== cls) {
          view.text = el('div', { class: cls });
          view.raw = '';
          view.renderMs = 0;
          view.attempt.push(view.text);
          liveAppend(view, view.text);
        }
        view.raw += ev.text;
        // Reasoning is plain text: each delta is appended, never the whole text again.
        if (cls === 'msg reasoning') view.text.append(ev.text);
        else if (!view.timer) {
          // Re-rendered as Markdown at most every 40 ms while deltas come in, and no sooner
          // than four times the last render took: a huge answer costs the page a fifth of
          // its time at most, not a render per delta.
          if (!view.text.firstChild) view.text.textContent = view.raw;
          view.timer = setTimeout(() => {
            view.timer = 0;
            if (view.text && view.text.className === 'msg assistant') renderLive(view);
          }, Math.max(40, 4 * (view.renderMs || 0)));
        }
        break;
      }
      case 'retrying':
        clearTimeout(view.timer);
        view.timer = 0;
        for (const n of view.attempt) n.remove();
        view.attempt = [];
        view.text = null;
        liveAppend(view, notice(`retrying (attempt ${ev.attempt}) in ${wall(ev.delay_ms)}: ${ev.reason}`));
        break;
      case 'response_finished': {
        const u = ev.usage || {};
        const d = state.detail;
        if (d && d.session.id === view.id && !follow) {
          // Until the turn ends and the session is read again, the chart grows live.
          d.requests = (d.requests || []).concat([{
            seq: -1, turn: ev.turn, input_tokens: u.input_tokens, cached_tokens: u.cached_tokens,
            output_tokens: u.output_tokens, estimate_tokens: ev.estimate_tokens,
          }]);
          if (state.current === view.id) {
            renderHead(d);
            $('#chart').replaceChildren(chart(d.requests, d.folds || []));
          }
        }
        setStatus(view, `turn ${ev.turn} · request ${ev.n} · input ${fmt(u.input_tokens)} (cached ${fmt(u.cached_tokens)}) · output ${fmt(u.output_tokens)}`);
        break;
      }
      case 'block_started': {
        flushText(view);
        const card = blockCard({ label: `t${ev.turn}/i${ev.iteration}`, code: ev.code, status: 'running' });
        view.blocks.set(`${ev.turn}/${ev.iteration}`, card);
        liveAppend(view, card);
        setStatus(view, `turn ${ev.turn} · block ${ev.iteration} running…`);
        break;
      }
      case 'block_finished': {
        let card = view.blocks.get(`${ev.turn}/${ev.iteration}`);
        if (!card) {
          card = blockCard({ label: `t${ev.turn}/i${ev.iteration}`, status: 'running' });
          liveAppend(view, card);
        }
        finishBlock(card, ev.status, ev.output, ev.wall_ms);
        setStatus(view, `turn ${ev.turn} · block ${ev.iteration}: ${ev.status} in ${wall(ev.wall_ms)}`);
        break;
      }
      case 'notice':
        liveAppend(view, notice(ev.text));
        break;
      case 'error':
        liveAppend(view, el('div', { class: 'turn-error' }, `${ev.kind}: ${ev.message}`));
        break;
      case 'turn_finished':
        flushText(view);
        if (!follow || ev.turn === view.turn || !view.turn) view.finished = true;
        view.final = `turn ${ev.turn || ''} finished: ${ev.status}`;
        setStatus(view, view.final);
        break;
      default:
        break;
    }
  }

  async function consume(view, resp, follow) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await readSse(resp, (ev, id) => {
          if (id) view.lastId = id;
          onEvent(view, ev, follow);
        });
      } catch (_) { /* the connection broke: resume below */ }
      if (view.finished || follow) return;
      if (attempt >= 5) throw new Error("lost the turn's event stream; reload to see how it ended");
      await sleep(250 * (attempt + 1));
      // Resume exactly after the last event seen.
      resp = await request('GET', `/api/sessions/${enc(view.id)}/events`, undefined,
        view.lastId ? { 'Last-Event-ID': view.lastId } : {});
    }
  }

  async function endLive(view) {
    flushText(view);
    state.lives.delete(view.id);
    const status = view.status;
    try { await loadSessions(); } catch (_) { /* shown elsewhere */ }
    if (state.current === view.id) {
      await refreshCurrent();
      $('#turn-status').textContent = status;
      window.scrollTo(0, document.body.scrollHeight);
    }
    updateComposer();
  }

  async function send(text) {
    const id = state.current;
    const view = liveView(id, text);
    renderDetailKeepingLive();
    setStatus(view, 'sending…');
    updateComposer();
    try {
      const resp = await request('POST', `/api/sessions/${enc(id)}/turns`, { message: text });
      await consume(view, resp, false);
    } catch (e) {
      liveAppend(view, el('div', { class: 'turn-error' }, e.message));
      view.status = e.message;
    }
    await endLive(view);
  }

  async function follow(id) {
    if (state.lives.has(id)) return;
    const view = liveView(id, null);
    renderDetailKeepingLive();
    updateComposer();
    try {
      const resp = await request('GET', `/api/sessions/${enc(id)}/events`);
      await consume(view, resp, true);
    } catch (e) {
      view.status = e.message;
    }
    await endLive(view);
  }

  function renderDetailKeepingLive() {
    if (state.detail && state.detail.session.id === state.current) renderDetail(state.detail);
  }

  function updateComposer() {
    const id = state.current;
    const live = id ? state.lives.get(id) : null;
    const s = state.sessions.find((x) => x.id === id);
    const running = !!live || (s && s.status === 'running');
    $('#send').disabled = running;
    $('#interrupt').hidden = !running;
    if (live) $('#turn-status').textContent = live.status;
  }

  // ---- wiring ------------------------------------------------------------------------

  function wire() {
    $('#composer').addEventListener('submit', (e) => {
      e.preventDefault();
      const box = $('#message');
      const text = box.value;
      if (!text.trim() || !state.current || state.lives.has(state.current)) return;
      box.value = '';
      send(text);
    });
    $('#message').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        $('#composer').requestSubmit();
      }
    });
    $('#interrupt').addEventListener('click', async () => {
      if (!state.current) return;
      try {
        await request('POST', `/api/sessions/${enc(state.current)}/interrupt`);
        $('#turn-status').textContent = 'interrupting…';
      } catch (e) {
        $('#turn-status').textContent = e.message;
      }
    });
    $('#new-session').addEventListener('submit', async (e) => {
      e.preventDefault();
      const err = $('#new-error');
      err.hidden = true;
      try {
        const resp = await request('POST', '/api/sessions', { workspace: $('#new-workspace').value.trim() });
        const { id } = await resp.json();
        $('#new-workspace').value = '';
        await loadSessions();
        location.hash = enc(id);
      } catch (ex) {
        if (ex.status === 401) return;
        err.textContent = ex.message;
        err.hidden = false;
      }
    });
    $('#login-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      const token = $('#token-input').value.trim();
      $('#token-input').value = '';
      let resp;
      try {
        // The token buys an HttpOnly cookie; the page does not keep the token.
        resp = await fetch('/api/login', {
          method: 'POST', cache: 'no-store', credentials: 'same-origin',
          headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token }),
        });
      } catch (ex) {
        $('#login-message').textContent = `cannot reach the server (${ex.message})`;
        return;
      }
      if (!resp.ok) {
        $('#login-message').textContent = `The server did not accept this token. ${LOGIN_HELP}`;
        return;
      }
      $('#login').hidden = true;
      state.needLogin = false;
      start();
    });
    $('#logout').addEventListener('click', async () => {
      try { await request('POST', '/api/logout'); } catch (_) { /* logged out either way */ }
      location.reload();
    });
    window.addEventListener('hashchange', () => openSession(decodeURIComponent(location.hash.slice(1)) || null));
  }

  async function start() {
    try {
      await loadSessions();
    } catch (_) {
      return; // a 401 asks to log in; start runs again once logged in
    }
    $('#logout').hidden = false;
    const id = decodeURIComponent(location.hash.slice(1)) || null;
    await openSession(id);
  }

  wire();
  noteExpiredLogin();
  if (!state.needLogin) start();
  setInterval(poll, POLL_MS);
})();
