// Logging in. The page never holds a credential: the one-time link vis serve prints, or the
// token typed into the form, is exchanged for an HttpOnly cookie this script cannot read, and
// the token is not kept.

import { $ } from './dom.js';
import { state } from './state.js';

export const LOGIN_HELP = 'Open the one-time login link vis serve printed when it started, or enter the server\'s token (in serve-token beside its database, or VIS_SERVE_TOKEN).';

export function askLogin(message) {
  state.needLogin = true;
  $('#login-message').textContent = message;
  $('#login').hidden = false;
  $('#token-input').focus();
}

// A used or unknown login link lands here with ?login=expired: say so, then tidy the address.
export function noteExpiredLogin() {
  const url = new URL(location.href);
  if (url.searchParams.get('login') === null) return;
  url.searchParams.delete('login');
  history.replaceState(null, '', url.pathname + url.search + url.hash);
  askLogin(`That login link is used up or unknown: each link works once, and only for the vis serve that printed it. ${LOGIN_HELP}`);
}

// The token form; `onLoggedIn` runs once the server took the token.
export function wireLoginForm(onLoggedIn) {
  $('#login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = $('#token-input').value.trim();
    $('#token-input').value = '';
    let resp;
    try {
      // The token buys an HttpOnly cookie; the page does not keep the token.
      resp = await fetch('/api/login', {
        method: 'POST', cache: 'no-store', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token }),
      });
    } catch (ex) {
      $('#login-message').textContent = `cannot reach the server (${ex.message})`;
      return;
    }
    if (!resp.ok) {
      $('#login-message').textContent = `The server did not accept this token. ${LOGIN_HELP}`;
      return;
    }
    $('#login').hidden = true;
    state.needLogin = false;
    onLoggedIn();
  });
}
