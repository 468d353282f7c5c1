// The sessions API, with the login cookie (HttpOnly: this script never sees it). A 401 asks
// the person to log in; the connection's state shows in the header.

import { $ } from './dom.js';
import { askLogin, LOGIN_HELP } from './login.js';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function request(method, path, body, headers) {
  const h = Object.assign({}, headers);
  const init = { method, headers: h, cache: 'no-store', credentials: 'same-origin' };
  if (body !== undefined) {
    h['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    setConn(`cannot reach the server (${e.message})`, true);
    throw new ApiError(0, 'network', `cannot reach the server: ${e.message}`);
  }
  if (resp.status === 401) {
    askLogin(LOGIN_HELP);
    throw new ApiError(401, 'unauthorized', 'not logged in');
  }
  setConn('', false);
  if (!resp.ok) {
    let j = null;
    try { j = await resp.json(); } catch (_) { /* not JSON */ }
    throw new ApiError(resp.status, (j && j.code) || 'http', (j && j.message) || `${resp.status} ${resp.statusText}`);
  }
  return resp;
}

export const getJson = async (path) => (await request('GET', path)).json();

function setConn(text, bad) {
  const c = $('#conn');
  c.textContent = text;
  c.className = bad ? 'error' : 'muted';
}
