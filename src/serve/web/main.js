// The Vis web view: one page over the sessions API, in ES modules the server ships as they
// are (no build step). This one wires the page's controls and starts it; see dom.js for the
// rule every module keeps (nodes only, never HTML from strings).

import { $ } from './dom.js';
import { enc } from './format.js';
import { state } from './state.js';
import { getJson, request } from './api.js';
import { noteExpiredLogin, wireLoginForm } from './login.js';
import { highlight } from './highlight.js';
import { inline, markdown } from './markdown.js';
import { loadSessions } from './session-list.js';
import { openSession, refreshCurrent, send } from './session.js';
import { renderHead } from './session-view.js';
import { runningJobs } from './work.js';

const POLL_MS = 3000;

// The renderer's functions, for the page's own tests (tests/it/web.rs run them on
// pathological inputs): they build nodes from text and hold nothing else.
Object.defineProperty(window, 'visRender', { value: Object.freeze({ markdown, inline, highlight }) });

async function poll() {
  if (state.needLogin || document.hidden) return;
  let before;
  try { before = await loadSessions(); } catch (_) { return; }
  const id = state.current;
  if (!id || state.lives.has(id)) return;
  const now = state.sessions.find((s) => s.id === id);
  const was = before.get(id);
  if (now && (!was || was.status !== now.status || was.updated_at !== now.updated_at)) refreshCurrent();
  else refreshJobs(id);
}

// Between turns, jobs that run go on and end: while the open session shows one running, its
// head is read again (the page after the last turn: no history, just the jobs).
async function refreshJobs(id) {
  const d = state.detail;
  if (!d || d.session.id !== id || !runningJobs(d.jobs)) return;
  const after = ((d.page && d.page.turns_total) || 0) + 1;
  let page;
  try { page = await getJson(`/api/sessions/${enc(id)}?from_turn=${after}&turns=1`); } catch (_) { return; }
  if (state.current !== id || state.detail !== d || state.lives.has(id)) return;
  d.jobs = page.jobs || [];
  renderHead(d);
}

function wire() {
  $('#composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const box = $('#message');
    const text = box.value;
    if (!text.trim() || !state.current || state.lives.has(state.current)) return;
    box.value = '';
    send(text);
  });
  $('#message').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('#composer').requestSubmit();
    }
  });
  $('#interrupt').addEventListener('click', async () => {
    if (!state.current) return;
    try {
      await request('POST', `/api/sessions/${enc(state.current)}/interrupt`);
      $('#turn-status').textContent = 'interrupting…';
    } catch (e) {
      $('#turn-status').textContent = e.message;
    }
  });
  $('#new-session').addEventListener('submit', async (e) => {
    e.preventDefault();
    const err = $('#new-error');
    err.hidden = true;
    try {
      const resp = await request('POST', '/api/sessions', { workspace: $('#new-workspace').value.trim() });
      const { id } = await resp.json();
      $('#new-workspace').value = '';
      await loadSessions();
      location.hash = enc(id);
    } catch (ex) {
      if (ex.status === 401) return;
      err.textContent = ex.message;
      err.hidden = false;
    }
  });
  $('#logout').addEventListener('click', async () => {
    try { await request('POST', '/api/logout'); } catch (_) { /* logged out either way */ }
    location.reload();
  });
  window.addEventListener('hashchange', () => openSession(decodeURIComponent(location.hash.slice(1)) || null));
}

async function start() {
  try {
    await loadSessions();
  } catch (_) {
    return; // a 401 asks to log in; start runs again once logged in
  }
  $('#logout').hidden = false;
  const id = decodeURIComponent(location.hash.slice(1)) || null;
  await openSession(id);
}

wire();
wireLoginForm(start);
noteExpiredLogin();
if (!state.needLogin) start();
setInterval(poll, POLL_MS);
