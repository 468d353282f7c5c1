// The selected session as shown: its head (workspace, model, token totals), the chart, the
// transcript with a live turn at its end, and the composer's buttons.

import { $, badge, el, tokens } from './dom.js';
import { plural } from './format.js';
import { state } from './state.js';
import { chart } from './chart.js';
import { transcript } from './transcript.js';
import { firstLine, jobsLine, sessionLink } from './work.js';

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

// Sub-sessions (spawn()): a link to the session that spawned this one, and one to each of
// its own children with its status and answer's first line (all inserted as text).
function family(d) {
  const link = (id) => sessionLink(id);
  const parts = [];
  if (d.parent) {
    parts.push(el('div', { class: 'meta parent' }, 'sub-session of ', link(d.parent.link.parent),
      ` (t${d.parent.link.turn}/i${d.parent.link.iteration}) · ${d.parent.status}`));
  }
  const children = d.children || [];
  if (children.length) {
    parts.push(el('div', { class: 'meta children' }, `${plural(children.length, 'sub-session')}: `,
      ...children.map((c) => el('span', { class: 'child' }, link(c.link.child),
        ` ${c.status}${c.answer ? ` — ${firstLine(c.answer, 80)}` : ''} `))));
  }
  return parts;
}

export function renderHead(d) {
  const t = totals(d);
  const m = d.model || {};
  const folds = (d.folds || []).length;
  const status = state.lives.has(d.session.id) ? 'running' : d.status;
  $('#session-head').replaceChildren(
    el('h2', {}, el('span', { class: 'sid' }, d.session.id), badge(status)),
    el('div', { class: 'meta' },
      `${(d.session.workspace_roots || []).join(', ')} · ${m.provider || '?'} ${m.model || ''} · `,
      tokens(t.input, t.cached, t.output),
      ` · ${plural(t.requests, 'request')}${t.failed ? ` (${t.failed} failed)` : ''} · ${plural(folds, 'fold')}`),
    ...family(d),
    ...jobsLine(d.jobs));
}

export function renderDetail(d) {
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

export function renderDetailKeepingLive() {
  if (state.detail && state.detail.session.id === state.current) renderDetail(state.detail);
}

export function updateComposer() {
  const id = state.current;
  const live = id ? state.lives.get(id) : null;
  const s = state.sessions.find((x) => x.id === id);
  const running = !!live || (s && s.status === 'running');
  $('#send').disabled = running;
  $('#interrupt').hidden = !running;
  if (live) $('#turn-status').textContent = live.status;
}
