// A fold in the transcript: its gist in place of the items it replaced (collapsed), its
// receipt and its measurement, and the original items, still stored but no longer sent.

import { badge, el } from './dom.js';
import { fmt } from './format.js';

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

export function foldCard(fold, spanIndex, inner) {
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
