// The list of sessions in the side bar.

import { $, badge, el, tokens } from './dom.js';
import { clock, enc, plural } from './format.js';
import { state } from './state.js';
import { getJson } from './api.js';

export function renderSessionList() {
  const list = $('#session-list');
  list.replaceChildren();
  if (!state.sessions.length) list.append(el('li', { class: 'empty' }, 'No sessions yet.'));
  for (const s of state.sessions) {
    const ws = (s.workspace || []).map((w) => w.split('/').filter(Boolean).pop() || w).join(', ');
    list.append(el('li', {}, el('a', {
      class: `session${s.id === state.current ? ' selected' : ''}`, href: `#${enc(s.id)}`, 'data-id': s.id,
    },
    el('div', { class: 'session-top' }, el('span', { class: 'sid' }, s.id), el('span', { class: 'spacer' }), badge(s.status)),
    el('div', { class: 'session-ws', title: (s.workspace || []).join(', ') }, ws),
    tokens(s.input_tokens, s.cached_tokens, s.output_tokens),
    el('div', { class: 'session-meta' }, `${plural(s.turns, 'turn')} · ${plural(s.requests, 'request')} · ${s.model || ''} · ${clock(s.updated_at)}`))));
  }
}

export async function loadSessions() {
  const before = new Map(state.sessions.map((s) => [s.id, s]));
  state.sessions = await getJson('/api/sessions');
  renderSessionList();
  return before;
}
