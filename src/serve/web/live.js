// A turn streaming in: its events as they come (text re-rendered as Markdown at most every
// 40 ms, blocks as cards with their output's last lines while they run, the chart growing), and the event stream resumed after the last
// event seen when the connection breaks.

import { $, el } from './dom.js';
import { enc, fmt, wall } from './format.js';
import { state } from './state.js';
import { request } from './api.js';
import { readSse } from './sse.js';
import { markdown } from './markdown.js';
import { blockCard, blockOutput, finishBlock, notice, turnHead, userMsg } from './blocks.js';
import { chart } from './chart.js';
import { renderSessionList } from './session-list.js';
import { renderHead } from './session-view.js';
import { applyJobEvent, childNotice } from './work.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function liveView(id, message) {
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
export function flushText(view) {
  clearTimeout(view.timer);
  view.timer = 0;
  if (view.text && view.text.className === 'msg assistant') renderLive(view);
  view.text = null;
}

export function liveAppend(view, node) {
  view.el.append(node);
  if (view.id === state.current) node.scrollIntoView({ block: 'nearest' });
}

export function setStatus(view, text) {
  view.status = text;
  if (view.id === state.current) $('#turn-status').textContent = text;
}

// The card of block `ev.turn`/`ev.iteration` (one made now when its start was not seen).
function runningCard(view, ev) {
  const key = `${ev.turn}/${ev.iteration}`;
  let card = view.blocks.get(key);
  if (!card) {
    // A call that did not run (rejected) had no block_started: its code comes with its end.
    card = blockCard({ label: `t${ev.turn}/i${ev.iteration}`, code: ev.code, status: 'running' });
    view.blocks.set(key, card);
    liveAppend(view, card);
  }
  return card;
}

// The session head's list of jobs follows the job events.
function jobChanged(view, ev) {
  const d = state.detail;
  if (!d || d.session.id !== view.id) return;
  d.jobs = applyJobEvent(d.jobs || [], ev);
  if (state.current === view.id) renderHead(d);
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
          output_tokens: u.output_tokens, estimate_tokens: ev.estimate_tokens, ...(ev.cost || {}),
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
    case 'block_output': {
      const made = blockOutput(runningCard(view, ev), ev.text, ev.skipped_bytes);
      if (made && view.id === state.current) made.scrollIntoView({ block: 'nearest' });
      break;
    }
    case 'block_finished': {
      finishBlock(runningCard(view, ev), ev.status, ev.output, ev.wall_ms, view.id, ev.images);
      setStatus(view, `turn ${ev.turn} · block ${ev.iteration}: ${ev.status} in ${wall(ev.wall_ms)}`);
      break;
    }
    case 'notice':
      liveAppend(view, notice(ev.text));
      break;
    case 'job_started':
      // Background jobs (sh.background): their starts and ends, between turns too.
      view.jobs = (view.jobs || new Set()).add(ev.id);
      liveAppend(view, notice(`job ${ev.id} started: ${ev.command} (${view.jobs.size} running)`));
      jobChanged(view, ev);
      break;
    case 'job_finished':
      if (view.jobs) view.jobs.delete(ev.id);
      liveAppend(view, notice(`${ev.line} (${view.jobs ? view.jobs.size : 0} running)`));
      jobChanged(view, ev);
      break;
    case 'child_started':
    case 'child_finished':
      // Sub-sessions (spawn()): each a link that opens it.
      liveAppend(view, childNotice(ev));
      break;
    case 'error':
      // The session moved to another node mid-turn: say so plainly; sending again reaches it.
      if (ev.kind === 'lease_lost') {
        liveAppend(view, el('div', { class: 'turn-error' }, `This session moved to another server node while the turn ran, so the turn stopped here (what it completed is kept). Send your message again to continue on the new node. (${ev.message})`));
      } else {
        liveAppend(view, el('div', { class: 'turn-error' }, `${ev.kind}: ${ev.message}`));
      }
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

export async function consume(view, resp, follow) {
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
