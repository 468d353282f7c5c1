// Opening a session (every page of its history), sending it a message, and following a turn
// that another client started.

import { $, el } from './dom.js';
import { enc } from './format.js';
import { state } from './state.js';
import { getJson, request } from './api.js';
import { consume, flushText, liveAppend, liveView, setStatus } from './live.js';
import { loadSessions, renderSessionList } from './session-list.js';
import { renderDetail, renderDetailKeepingLive, updateComposer } from './session-view.js';

// A session's details, every page of turns (GET /api/sessions/{id} gives one page).
async function getDetail(id) {
  let d = null;
  let from = 1;
  for (;;) {
    const page = await getJson(`/api/sessions/${enc(id)}?from_turn=${from}`);
    if (!d) d = page;
    else for (const k of ['turns', 'iterations', 'folds', 'history', 'requests']) d[k] = d[k].concat(page[k]);
    const next = page.page && page.page.next_turn;
    if (!next || next <= from) return d;
    from = next;
  }
}

export async function openSession(id) {
  state.current = id;
  renderSessionList();
  $('#empty').hidden = !!id;
  $('#session-view').hidden = !id;
  if (!id) return;
  try {
    const d = await getDetail(id);
    if (state.current !== id) return;
    renderDetail(d);
    if (d.status === 'running' && !state.lives.has(id)) follow(id);
  } catch (e) {
    if (e.status === 401 || state.current !== id) return;
    $('#session-head').replaceChildren(el('p', { class: 'error' }, e.message));
    $('#chart').replaceChildren();
    $('#transcript').replaceChildren();
  }
}

export const refreshCurrent = () => (state.current ? openSession(state.current) : undefined);

async function endLive(view) {
  flushText(view);
  state.lives.delete(view.id);
  const status = view.status;
  try { await loadSessions(); } catch (_) { /* shown elsewhere */ }
  if (state.current === view.id) {
    await refreshCurrent();
    $('#turn-status').textContent = status;
    window.scrollTo(0, document.body.scrollHeight);
  }
  updateComposer();
}

export async function send(text) {
  const id = state.current;
  const view = liveView(id, text);
  renderDetailKeepingLive();
  setStatus(view, 'sending…');
  updateComposer();
  try {
    const resp = await request('POST', `/api/sessions/${enc(id)}/turns`, { message: text });
    await consume(view, resp, false);
  } catch (e) {
    liveAppend(view, el('div', { class: 'turn-error' }, e.message));
    view.status = e.message;
  }
  await endLive(view);
}

async function follow(id) {
  if (state.lives.has(id)) return;
  const view = liveView(id, null);
  renderDetailKeepingLive();
  updateComposer();
  try {
    const resp = await request('GET', `/api/sessions/${enc(id)}/events`);
    await consume(view, resp, true);
  } catch (e) {
    view.status = e.message;
  }
  await endLive(view);
}
