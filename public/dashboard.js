// Slipway dashboard: a small client of the public API (same origin), holding its session in sessionStorage.
'use strict';
const api = '/api/v1';
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem('slipway-token');

async function call(method, path, body) {
  return (await send(method, api + path, body)).data;
}

async function send(method, url, body) {
  const headers = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) { logout(); throw new Error('your session has ended: log in again'); }
  if (res.status === 204) return { data: null, res };
  const type = res.headers.get('content-type') || '';
  const data = type.includes('json') ? await res.json() : await res.text();
  if (!res.ok) throw new Error(data && data.message ? data.message : `HTTP ${res.status}`);
  return { data, res };
}

// A whole list: the API answers a page at a time and links the next one (`Link: <…>; rel="next"`).
async function callAll(path) {
  const items = [];
  for (let url = api + path; url;) {
    const { data, res } = await send('GET', url);
    items.push(...data);
    const next = /<([^>]*)>\s*;\s*rel="next"/.exec(res.headers.get('link') || '');
    url = next ? new URL(next[1], location.href).href : null;
  }
  return items;
}

function cell(row, text, className) {
  const td = document.createElement('td');
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function button(parent, label, action) {
  const b = document.createElement('button');
  b.textContent = label;
  b.addEventListener('click', () => run(action));
  parent.appendChild(b);
}

async function run(action) {
  $('error').textContent = '';
  try { await action(); } catch (err) { $('error').textContent = err.message; }
}

function show(loggedIn) {
  $('login').hidden = loggedIn;
  for (const id of ['apps', 'keys', 'logout']) $(id).hidden = !loggedIn;
  if (!loggedIn) $('detail').hidden = true;
}

// A new key's secret is shown once, until the next action: revoking any key, logging out, opening
// an app's builds, or leaving the page (also when the browser keeps the page for Back) clears it.
function forgetNewKey() {
  $('new-key').textContent = '';
  $('new-key').hidden = true;
}

function logout() {
  token = null;
  sessionStorage.removeItem('slipway-token');
  forgetNewKey();
  $('who').textContent = '';
  // Nothing of this user's stays in the page for the next one to log in on this tab.
  for (const id of ['app-rows', 'build-rows', 'key-rows', 'log', 'detail-title']) $(id).replaceChildren();
  $('log-title').textContent = 'Log';
  show(false);
}

async function loadApps() {
  const apps = await callAll('/deployments');
  const rows = $('app-rows');
  rows.replaceChildren();
  for (const app of apps) {
    const tr = document.createElement('tr');
    cell(tr, app.name);
    const link = document.createElement('a');
    link.href = app.url; link.textContent = app.url; link.rel = 'noopener';
    cell(tr, '').appendChild(link);
    cell(tr, app.status, `status-${app.status}`);
    cell(tr, app.source_type === 'git' ? `git ${app.branch || '(default)'}` : 'archive');
    cell(tr, new Date(app.updated_at).toLocaleString());
    const actions = cell(tr, '');
    button(actions, 'Builds', () => loadBuilds(app));
    button(actions, 'Deploy', async () => { await call('POST', `/deployments/${app.id}/deploy`); await loadApps(); await loadBuilds(app); });
    if (app.status === 'building') {
      button(actions, 'Cancel build', async () => {
        const { message } = await call('POST', `/deployments/${app.id}/cancel`);
        await loadApps();
        await loadBuilds(app);
        $('log-title').textContent = message;
      });
    }
    button(actions, 'Stop', async () => { await call('POST', `/deployments/${app.id}/stop`); await loadApps(); });
    button(actions, 'Restart', async () => { await call('POST', `/deployments/${app.id}/restart`); await loadApps(); });
    button(actions, 'Delete', async () => {
      if (!confirm(`Delete ${app.name} with its containers, images and logs?`)) return;
      await call('DELETE', `/deployments/${app.id}`);
      $('detail').hidden = true;
      await loadApps();
    });
    rows.appendChild(tr);
  }
}

async function loadBuilds(app) {
  forgetNewKey();
  const builds = await callAll(`/deployments/${app.id}/builds`);
  $('detail').hidden = false;
  $('detail-title').textContent = `${app.name} (${app.subdomain})`;
  const rows = $('build-rows');
  rows.replaceChildren();
  for (const build of builds) {
    const tr = document.createElement('tr');
    cell(tr, build.id.slice(0, 8) + (build.id === app.live_build_id ? ' (live)' : ''));
    cell(tr, build.status, `status-${build.status === 'succeeded' ? 'running' : build.status}`);
    cell(tr, build.commit_sha.slice(0, 12));
    cell(tr, new Date(build.started_at).toLocaleString());
    const actions = cell(tr, '');
    button(actions, 'Log', async () => {
      $('log-title').textContent = `Log of build ${build.id.slice(0, 8)}`;
      $('log').textContent = await call('GET', `/deployments/${app.id}/builds/${build.id}/logs`);
    });
    if (build.status === 'succeeded' && build.id !== app.live_build_id) {
      button(actions, 'Roll back', async () => {
        const { message } = await call('POST', `/deployments/${app.id}/rollback`, { build_id: build.id });
        $('log-title').textContent = message;
        await loadApps();
      });
    }
    rows.appendChild(tr);
  }
}

async function loadKeys() {
  const keys = await callAll('/api-keys');
  const rows = $('key-rows');
  rows.replaceChildren();
  for (const key of keys) {
    const tr = document.createElement('tr');
    cell(tr, key.name);
    cell(tr, `${key.key_prefix}…`);
    cell(tr, key.last_used_at ? new Date(key.last_used_at).toLocaleString() : 'never');
    button(cell(tr, ''), 'Revoke', async () => {
      forgetNewKey();
      await call('DELETE', `/api-keys/${key.id}`);
      await loadKeys();
    });
    rows.appendChild(tr);
  }
}

async function start() {
  if (!token) return show(false);
  const me = await call('GET', '/users/me');
  $('who').textContent = me.email;
  show(true);
  await Promise.all([loadApps(), loadKeys()]);
}

$('login-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  run(async () => {
    const res = await fetch(`${api}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: form.get('email'), password: form.get('password') }),
    });
    const data = await res.json();
    if (!res.ok) throw new Error(data.message);
    token = data.token;
    sessionStorage.setItem('slipway-token', token);
    await start();
  });
});
$('key-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  run(async () => {
    const created = await call('POST', '/api-keys', { name: form.get('name') });
    $('new-key').hidden = false;
    $('new-key').textContent = `New key (shown once): ${created.key}`;
    event.target.reset();
    await loadKeys();
  });
});
$('logout').addEventListener('click', () => run(async () => { await call('POST', '/auth/logout').catch(() => null); logout(); }));
window.addEventListener('pagehide', forgetNewKey);
window.addEventListener('hashchange', forgetNewKey);
run(start);
