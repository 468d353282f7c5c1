// The chart: input tokens per model request, the cached part, and where folds happened
// (an SVG built node by node).

import { el, svg } from './dom.js';
import { fmt, plural, short } from './format.js';

// A round step for about four gridlines up to `v`.
function niceStep(v) {
  const raw = Math.max(1, v / 4);
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const k of [1, 2, 5]) if (k * p >= raw) return k * p;
  return 10 * p;
}

export function chart(requests, folds) {
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
      svg('title', {}, `request ${i + 1} (turn ${r.turn}, #${ordinal[i]})\ninput ${fmt(v)}${estimated ? ' (estimate)' : ''}, cached ${fmt(r.cached_tokens)}, output ${fmt(r.output_tokens)}${r.finish_reason ? `\nfinished: ${r.finish_reason}` : ''}${r.retries ? `\nretries: ${r.retries}` : ''}${r.error ? `\nerror: ${r.error}` : ''}`),
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
