// The chart: input tokens per model request, the cached part, the cost-weighted input (a line:
// the input in uncached-token units at the cache prices), requests flagged as cache misses,
// and where folds happened (an SVG built node by node).

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
  const known = (v) => v !== null && v !== undefined;
  const weighted = requests.map((r) => (known(r.weighted_tokens) ? r.weighted_tokens : null));
  const top = Math.max(1, ...vals, ...weighted.filter(known));
  const tick = niceStep(top);
  const max = tick * Math.ceil(top / tick);
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
    const miss = r.cache_miss === true;
    const cost = known(weighted[i])
      ? `\nweighted ${fmt(Math.round(weighted[i]))} (uncached ${fmt(r.uncached_tokens)}, cache write ${fmt(r.cache_write_tokens)})`
      : '\nweighted – (no cache figures reported)';
    const expected = known(r.expected_cached_tokens) ? `\nexpected cached ${fmt(r.expected_cached_tokens)}` : '';
    const g = svg('g', { class: `bar${estimated ? ' estimated' : ''}${r.error_kind ? ' failed' : ''}${miss ? ' cache-miss' : ''}`, 'data-seq': r.seq },
      svg('title', {}, `request ${i + 1} (turn ${r.turn}, #${ordinal[i]})\ninput ${fmt(v)}${estimated ? ' (estimate)' : ''}, cached ${fmt(r.cached_tokens)}, output ${fmt(r.output_tokens)}${r.error_kind ? '' : cost}${expected}${miss ? '\nCACHE MISS: cache reads under half the expected (a prefix bug?)' : ''}${r.finish_reason ? `\nfinished: ${r.finish_reason}` : ''}${r.retries ? `\nretries: ${r.retries}` : ''}${r.error ? `\nerror: ${r.error}` : ''}`),
      svg('rect', { class: 'input', x, y: y(v), width: bw, height: Math.max(0, y(0) - y(v)) }));
    if (c > 0) g.append(svg('rect', { class: 'cached', x, y: y(c), width: bw, height: y(0) - y(c) }));
    if (miss) g.append(svg('text', { class: 'miss-mark', x: x + bw / 2, y: y(v) - 3, 'text-anchor': 'middle' }, '!'));
    s.append(g);
    const cx = L + i * step + step / 2;
    if (ordinal[i] === 1 && cx - lastLabel > 26) {
      lastLabel = cx;
      s.append(svg('text', { class: 'axis-label', x: cx, y: H - B + 14, 'text-anchor': 'middle' }, `t${r.turn}`));
    }
  });
  // The weighted input as a line through the requests that have it (a gap where one has not).
  let run = [];
  const flush = () => {
    if (run.length > 1) s.append(svg('polyline', { class: 'weighted', points: run.join(' ') }));
    run = [];
  };
  weighted.forEach((w, i) => {
    if (!known(w)) return flush();
    const cx = L + i * step + step / 2;
    run.push(`${cx.toFixed(1)},${y(w).toFixed(1)}`);
    s.append(svg('circle', { class: 'weighted-point', cx, cy: y(w), r: 2.5, 'data-seq': requests[i].seq },
      svg('title', {}, `request ${i + 1}: weighted ${fmt(Math.round(w))}`)));
  });
  flush();
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
    el('span', {}, el('i', { class: 'l-weighted' }), 'weighted'),
    el('span', {}, el('i', { class: 'l-fold' }), 'fold'),
    el('span', { class: 'spacer' }),
    el('span', { class: 'chart-summary' }, `${plural(n, 'request')} · last ${fmt(vals[n - 1])} · peak ${fmt(Math.max(...vals))} · ${inputs ? Math.round((100 * cached) / inputs) : 0}% cached`)),
  el('div', { class: 'cost-summary' }, costSummary(requests)));
  return wrap;
}

// The session's cost as `vis sessions show` sums it (store/cost.rs): weighted input over the
// requests whose provider reported cache figures, the measured cache share beside the expected
// one, and the cache misses.
export function costSummary(requests) {
  const known = (v) => v !== null && v !== undefined;
  let weighted = 0;
  let priced = 0;
  let pricedInput = 0;
  let reads = 0;
  let expected = 0;
  let estimatedInput = 0;
  let estimated = 0;
  let misses = 0;
  for (const r of requests) {
    if (r.error_kind) continue;
    if (known(r.weighted_tokens) && known(r.uncached_tokens) && known(r.cached_tokens) && known(r.cache_write_tokens)) {
      priced += 1;
      weighted += r.weighted_tokens;
      reads += r.cached_tokens;
      pricedInput += r.uncached_tokens + r.cached_tokens + r.cache_write_tokens;
    }
    if (known(r.expected_cached_tokens)) {
      estimated += 1;
      expected += r.expected_cached_tokens;
      estimatedInput += known(r.input_tokens) ? r.input_tokens : r.estimate_tokens || 0;
    }
    if (r.cache_miss === true) misses += 1;
  }
  const share = (a, b) => (b > 0 ? `${Math.round((100 * a) / b)}%` : '–');
  const parts = [priced ? `weighted input ${fmt(Math.round(weighted))}` : 'weighted input – (no cache figures reported)',
    `cache share ${share(reads, pricedInput)} measured, ${estimated ? share(expected, estimatedInput) : '–'} expected`];
  if (misses) parts.push(`${fmt(misses)} cache miss${misses === 1 ? '' : 'es'} (a prefix bug?)`);
  return parts.join(' · ');
}
