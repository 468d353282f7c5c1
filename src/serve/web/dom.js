// Building the page's nodes. Everything shown comes from the model, blocks or files and is
// untrusted, so the page builds DOM nodes and text nodes only: no HTML parsing of strings, no
// inline handlers (`el` and `svg` refuse `on…` attributes). Every module builds through these.

import { fmt } from './format.js';

export const $ = (sel) => document.querySelector(sel);

export function append(node, children) {
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

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  return append(node, children);
}

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(node, attrs);
  return append(node, children);
}

export const badge = (text, cls) => el('span', { class: `badge ${cls || text}` }, text);

export function tokens(input, cached, output) {
  return el('span', { class: 'tokens' },
    el('span', {}, 'in ', el('b', {}, fmt(input))),
    el('span', {}, 'cached ', el('b', {}, fmt(cached))),
    el('span', {}, 'out ', el('b', {}, fmt(output))));
}
