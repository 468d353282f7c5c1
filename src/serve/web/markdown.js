// Markdown: a small renderer that builds nodes (text is never parsed as HTML).
//
// Linear in its input, whatever it holds: each kind of closing mark is looked for by a
// scan that only moves forward (`seek`), a link's destination is parsed once per `]`, code
// spans pair backtick runs of equal length through an index of the runs, and quotes and
// lists nest at most MAX_DEPTH deep (deeper ones show as text). Nothing backtracks.
// Links are kept only when they are http(s) or mailto.

import { append, el } from './dom.js';
import { highlight } from './highlight.js';

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
export function inline(text, depth = 0) {
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
export function markdown(src, depth = 0) {
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
