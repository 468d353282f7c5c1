// Python highlighting: a small tokenizer, one sticky regular expression, that keeps every
// character of the code and wraps keywords, names, strings, numbers and comments in spans.

import { el } from './dom.js';

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

export function highlight(code) {
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
