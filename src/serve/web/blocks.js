// The pieces of a transcript: messages, notices, turn headings, and a block's card (its code,
// status, wall time and output, collapsed beyond COLLAPSE_LINES lines; while it runs, the last
// LIVE_LINES lines it printed).

import { badge, el } from './dom.js';
import { clock, wall } from './format.js';
import { highlight } from './highlight.js';
import { markdown } from './markdown.js';
import { childrenBox } from './work.js';

const COLLAPSE_LINES = 8;
const LIVE_LINES = 5;
// The most of a running block's output a card keeps (its end).
const LIVE_KEEP = 4096;

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

const FORMAT_LABELS = { png: 'PNG', jpeg: 'JPEG', gif: 'GIF', webp: 'WebP' };

// `[image 812×600 PNG 48 KB: caption]`, as the block's output says it.
function imageLine(m) {
  const kb = m.bytes < 1024 ? `${m.bytes} B` : m.bytes < 1048576 ? `${Math.ceil(m.bytes / 1024)} KB` : `${(m.bytes / 1048576).toFixed(1)} MB`;
  return `[image ${m.width}×${m.height} ${FORMAT_LABELS[m.format] || m.format} ${kb}${m.caption ? `: ${m.caption}` : ''}]`;
}

// The images a block showed (`show()`): <img> elements built with DOM calls, each served by
// the session's image route (as the format the host validated, nosniff), captions as text.
function imagesBox(session, images) {
  const box = el('div', { class: 'images' });
  for (const m of images) {
    if (!/^[0-9a-f]{64}$/.test(String(m.hash))) continue;
    const img = el('img', {
      class: 'shown-image',
      src: `/api/sessions/${encodeURIComponent(session)}/images/${m.hash}`,
      alt: m.caption || `image ${m.width}×${m.height}`,
      width: m.width,
      height: m.height,
      loading: 'lazy',
      referrerpolicy: 'no-referrer',
    });
    box.append(el('figure', { class: 'shown' }, img, el('figcaption', {}, imageLine(m))));
  }
  return box;
}

export function blockCard(b) {
  const status = b.status || 'running';
  const head = el('div', { class: 'block-head' },
    el('span', { class: 'label' }, b.label || 'block'),
    status === 'running' ? el('span', { class: 'spinner', 'aria-hidden': 'true' }) : null,
    badge(status, `status ${status}`),
    el('span', { class: 'wall' }, wall(b.wall_ms)));
  const card = el('div', { class: 'block', 'data-status': status }, head);
  if (b.code !== undefined && b.code !== null) card.append(el('pre', { class: 'code' }, el('code', {}, highlight(b.code))));
  if (b.output !== undefined && b.output !== null) card.append(outputBox(b.output));
  if (b.session && b.images && b.images.length) card.append(imagesBox(b.session, b.images));
  if (b.children && b.children.length) card.append(childrenBox(b.children));
  return card;
}

// A line as a terminal would show it: from its last carriage return (a progress bar).
function lastState(line) {
  const l = line.endsWith('\r') ? line.slice(0, -1) : line;
  return l.slice(l.lastIndexOf('\r') + 1);
}

// Adds what a running block printed (`skipped` bytes before it were not sent) to its card,
// which shows the last LIVE_LINES lines as text until the block finishes. Returns the box of
// lines when this made it (null after).
export function blockOutput(card, text, skipped) {
  let box = card.querySelector('.live-output');
  const made = !box;
  if (made) {
    box = el('pre', { class: 'live-output' });
    card.append(el('div', { class: 'output live' }, box));
    card.liveText = '';
  }
  const kept = (skipped > 0 ? '' : card.liveText) + text;
  card.liveText = kept.length > LIVE_KEEP ? kept.slice(kept.length - LIVE_KEEP) : kept;
  const lines = card.liveText.split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  box.textContent = lines.slice(-LIVE_LINES).map(lastState).join('\n');
  return made ? box : null;
}

export function finishBlock(card, status, output, ms, session, images) {
  card.setAttribute('data-status', status);
  const head = card.querySelector('.block-head');
  const sp = head.querySelector('.spinner');
  if (sp) sp.remove();
  const b = head.querySelector('.status');
  b.textContent = status;
  b.className = `badge status ${status}`;
  head.querySelector('.wall').textContent = wall(ms);
  const live = card.querySelector('.output.live');
  if (live) live.remove();
  card.liveText = '';
  card.append(outputBox(output));
  if (session && images && images.length) card.append(imagesBox(session, images));
}

export const userMsg = (text) => el('div', { class: 'msg user' }, text);
export const assistantMsg = (text) => el('div', { class: 'msg assistant' }, markdown(text));
export const notice = (text) => el('div', { class: 'notice' }, text);

export function turnHead(turn, status, at) {
  return el('div', { class: 'turn-head', 'data-turn': turn },
    el('span', {}, `Turn ${turn}`), status ? badge(status) : null, el('span', {}, clock(at)));
}
