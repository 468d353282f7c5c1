// A session's stored history as the transcript: turns, messages, blocks with their results,
// and active folds in place of the items they replace.

import { el } from './dom.js';
import { assistantMsg, blockCard, notice, turnHead, userMsg } from './blocks.js';
import { foldCard } from './folds.js';

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
export function transcript(d, skipTurn) {
  const root = document.createDocumentFragment();
  const iters = new Map((d.iterations || []).map((it) => [`${it.turn}/${it.iteration}`, it]));
  const turns = new Map((d.turns || []).map((t) => [t.turn, t]));
  // The sub-sessions each block spawned, shown under its card.
  const spawned = new Map();
  for (const c of d.children || []) {
    const key = `${c.link.turn}/${c.link.iteration}`;
    spawned.set(key, (spawned.get(key) || []).concat([c]));
  }
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
  // What the model read instead of each image its model took none of (kept with the result),
  // after the block, where the live view's notice was: text, like every notice.
  const notSent = (r, into) => {
    for (const m of (r && r.images) || []) if (typeof m.not_sent === 'string') into.append(notice(m.not_sent));
  };
  // The last answer of each turn: a turn cut at the output limit says so after it.
  const lastAnswer = new Map();
  for (const h of items) if (h.kind === 'assistant') lastAnswer.set(h.turn, h.seq);

  // A turn's heading, before the first thing of that turn appended to `into`.
  const headTurn = (turn, into, ctx) => {
    if (ctx.turn === turn) return;
    ctx.turn = turn;
    const t = turns.get(turn) || {};
    into.append(turnHead(turn, t.status, t.started_at));
  };

  const item = (h, into, ctx) => {
    headTurn(h.turn, into, ctx);
    if (h.kind === 'user') into.append(userMsg(h.body));
    else if (h.kind === 'notice') into.append(notice(h.body));
    else if (h.kind === 'assistant') {
      let text = '';
      let drawn = false;
      const flushText = () => { if (text.trim()) { into.append(assistantMsg(text)); drawn = true; } text = ''; };
      for (const b of parseAssistant(h.body)) {
        if (b.type === 'text') text += (text ? '\n\n' : '') + (b.text || '');
        else if (b.type === 'reasoning' || b.type === 'thinking') {
          flushText();
          if (b.text || b.thinking) into.append(el('div', { class: 'msg reasoning' }, b.text || b.thinking));
        } else if (b.type === 'tool_call') {
          flushText();
          drawn = true;
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
            session: d.session && d.session.id,
            images: r ? r.images : null,
            children: r ? spawned.get(`${r.turn}/${r.iteration}`) : null,
          }));
          notSent(r, into);
        }
      }
      flushText();
      if (!drawn) into.append(notice('(empty answer: the model sent no text and no tool call)'));
      const t = turns.get(h.turn) || {};
      if (t.status === 'output_limit' && lastAnswer.get(h.turn) === h.seq) {
        into.append(notice('the answer was cut at the output limit'));
      }
    } else if (h.kind === 'tool_result' && !shown.has(h.seq)) {
      const it = iters.get(`${h.turn}/${h.iteration}`);
      into.append(blockCard({ label: `t${h.turn}/i${h.iteration}`, code: it ? it.code : null, status: h.status, output: h.body, wall_ms: it ? it.duration_ms : null, session: d.session && d.session.id, images: h.images, children: spawned.get(`${h.turn}/${h.iteration}`) }));
      notSent(h, into);
    }
  };

  const ctx = { turn: null };
  let oi = 0;
  const orphansBefore = (turn) => {
    while (oi < orphans.length && (turn === null || orphans[oi].turn < turn)) {
      const it = orphans[oi++];
      headTurn(it.turn, root, ctx);
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
