// Slipway dashboard: hash routes over the public API, a view per page; every view stops its polls and streams when left.
import { ApiError, call, session } from './api.js';
import { closeDialogs, h } from './dom.js';
import { renderList, renderNew } from './apps.js';
import { renderDeployment } from './deployment.js';
import { forgetNewKey, renderAccount, renderKeys } from './account.js';
import { loadSwitcher, renderTeam, renderTeams } from './teams.js';
import { renderAudit } from './audit.js';
import { renderTunnels } from './tunnels.js';
import { renderDatabases } from './databases.js';
import { renderNotifications } from './notifications.js';
import { renderAllTunnels, renderUsers } from './admin.js';
import { phoneMenu } from './phone-menu.js';

const $ = (id) => document.getElementById(id);
let current = null; // { controller } of the view on screen

/** Shows an error (the API's message) in the page's alert region; `null` clears it. */
export function report(err) {
  if (err && err.name === 'AbortError') return;
  $('error').textContent = err ? err.message || String(err) : '';
}

/** Runs an action from a button or form: clears the last error, shows this one's. */
export async function run(action) {
  report(null);
  try { await action(); } catch (err) { report(err); }
}

/**
 * Calls `fn(signal)` now and every `ms` until the view is left. A failing poll shows its message
 * once and keeps trying (the server may be restarting).
 */
export function poll(signal, ms, fn) {
  let shown = false;
  const tick = async () => {
    if (signal.aborted) return;
    try {
      await fn(signal);
      if (shown) { shown = false; report(null); }
    } catch (err) {
      if (!signal.aborted && !shown) { shown = true; report(err); }
    }
    if (!signal.aborted) setTimeout(tick, document.hidden ? ms * 3 : ms);
  };
  tick();
}

const ROUTES = [
  [/^#\/?$/, 'apps', (view, m, ctx) => renderList(view, ctx)],
  [/^#\/new$/, 'new', (view, m, ctx) => renderNew(view, ctx)],
  [/^#\/d\/([0-9a-f-]{36})(?:\/([a-z-]+))?$/, 'apps', (view, m, ctx) => renderDeployment(view, m[1], m[2], ctx)],
  [/^#\/keys$/, 'keys', (view, m, ctx) => renderKeys(view, ctx)],
  [/^#\/account$/, 'account', (view, m, ctx) => renderAccount(view, ctx)],
  [/^#\/teams$/, 'teams', (view, m, ctx) => renderTeams(view, ctx)],
  [/^#\/teams\/([0-9a-f-]{36})$/, 'teams', (view, m, ctx) => renderTeam(view, m[1], ctx)],
  [/^#\/audit(?:\?(.*))?$/, 'audit', (view, m, ctx) => renderAudit(view, ctx, new URLSearchParams(m[1] || ''))],
  [/^#\/tunnels$/, 'tunnels', (view, m, ctx) => renderTunnels(view, ctx)],
  [/^#\/databases$/, 'databases', (view, m, ctx) => renderDatabases(view, ctx)],
  [/^#\/notifications$/, 'notifications', (view, m, ctx) => renderNotifications(view, ctx)],
  [/^#\/admin\/users$/, 'users', (view, m, ctx) => renderUsers(view, ctx)],
  [/^#\/admin\/tunnels$/, 'all-tunnels', (view, m, ctx) => renderAllTunnels(view, ctx)],
];

function route() {
  current?.controller.abort();
  current = null;
  closeDialogs();
  const view = $('view');
  view.replaceChildren();
  if (!session.active) return;
  const hash = location.hash || '#/';
  const controller = new AbortController();
  current = { controller };
  const ctx = { signal: controller.signal, report, run, poll: (ms, fn) => poll(controller.signal, ms, fn), teamsChanged: () => loadSwitcher(route) };
  for (const [pattern, nav, render] of ROUTES) {
    const m = pattern.exec(hash);
    if (!m) continue;
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    render(view, m, ctx);
    return;
  }
  view.append(h('section', { class: 'card' }, h('h1', { text: 'Not found' }), h('p', {}, 'No page here. ', h('a', { href: '#/', text: 'Back to your apps' }))));
}

function showSignedIn(signedIn) {
  $('login').hidden = signedIn;
  $('nav').hidden = !signedIn;
  $('logout').hidden = !signedIn;
}

/** Ends the session in this tab: nothing of this user stays in the page for the next one. */
function signOut(message, focus = true) {
  session.clear();
  current?.controller.abort();
  current = null;
  closeDialogs();
  forgetNewKey();
  $('who').textContent = '';
  $('team-switch-label').hidden = true;
  $('team-switch').replaceChildren();
  $('otp-label').hidden = true;
  $('view').replaceChildren();
  showSignedIn(false);
  report(message ? { message } : null);
  if (focus) $('login-form').querySelector('input[name=email]').focus();
}

/** Tells the other tabs of this browser (same origin) that the session began or ended. */
const tabs = 'BroadcastChannel' in window ? new BroadcastChannel('slipway-session') : null;

/** Picks up the session the browser's cookie holds (another tab may have logged in). */
async function start() {
  let me;
  try {
    me = await call('GET', '/auth/session', undefined, { noLogout: true });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return signOut(undefined, false);
    throw err;
  }
  session.set(me.csrf_token);
  $('who').textContent = me.user.email;
  showSignedIn(true);
  // Administrators' pages: shown when the user list answers (the API decides who is one).
  const admin = await call('GET', '/users?limit=1', undefined, { noLogout: true }).then(() => true, () => false);
  for (const a of document.querySelectorAll('[data-admin]')) a.hidden = !admin;
  await loadSwitcher(route);
  route();
}

session.onUnauthorized(() => signOut('your session has ended: log in again'));

$('login-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  run(async () => {
    const res = await fetch('/api/v1/auth/session', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: form.get('email'), password: form.get('password'), ...(form.get('otp') ? { otp: form.get('otp') } : {}) }),
    });
    const data = await res.json().catch(() => ({}));
    if (res.status === 401 && !form.get('otp')) {
      // One answer for every refused login (the server never says that only the code was missing):
      // offer the code field, for accounts with two-factor login, and log in again with it.
      $('otp-label').hidden = false;
      $('otp-label').querySelector('input').focus();
    }
    if (!res.ok) throw new Error(data.message || `the server answered HTTP ${res.status}`);
    event.target.reset();
    $('otp-label').hidden = true;
    $('otp-label').querySelector('input').required = false;
    await start();
    tabs?.postMessage('login');
    $('main').focus();
  });
});
$('logout').addEventListener('click', () => run(async () => {
  await call('POST', '/auth/logout').catch(() => null);
  signOut();
  tabs?.postMessage('logout');
}));
tabs?.addEventListener('message', (event) => {
  if (event.data === 'logout' && session.active) signOut('you logged out in another tab', false);
  if (event.data === 'login' && !session.active) run(start);
});
window.addEventListener('hashchange', () => {
  forgetNewKey();
  report(null);
  route();
  // Keyboard and screen-reader users land on the new page's content.
  document.querySelector('#view h1')?.setAttribute('tabindex', '-1');
  document.querySelector('#view h1')?.focus({ preventScroll: false });
});
window.addEventListener('pagehide', forgetNewKey);
phoneMenu();
// Marks the page as started (tests wait for it instead of for time).
run(start).then(() => { document.documentElement.dataset.ready = ''; });
