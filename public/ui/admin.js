// Administrators' pages: the users (create, reset a password, disable/enable) and every user's live tunnels.
import { call, callAll } from './api.js';
import { badge, h, replaceKeepingFocus, when } from './dom.js';

export function renderUsers(view, ctx) {
  const rows = h('tbody', { id: 'user-rows' });
  const email = h('input', { name: 'email', type: 'email', required: true, autocomplete: 'off', id: 'new-user-email' });
  const password = h('input', { name: 'password', type: 'password', required: true, minlength: '8', autocomplete: 'new-password', id: 'new-user-password' });
  const form = h('form', { id: 'new-user', class: 'row', onsubmit: (event) => {
    event.preventDefault();
    ctx.run(async () => {
      await call('POST', '/users', { email: email.value, password: password.value });
      form.reset();
      await load();
    });
  } },
  h('label', { for: 'new-user-email', text: 'E-mail' }), email,
  h('label', { for: 'new-user-password', text: 'Password' }), password,
  h('button', { type: 'submit', text: 'Create user' }));
  view.append(h('section', { class: 'card', id: 'users' },
    h('h1', { text: 'Users' }), form,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['E-mail', 'Since', 'State', 'Actions'].map((t) => h('th', { scope: 'col', text: t })))), rows)));
  const load = async () => {
    const users = await callAll('/users', { signal: ctx.signal });
    replaceKeepingFocus(rows, users.map((u) => h('tr', {},
      h('td', { 'data-label': 'E-mail', text: u.email + (u.is_admin ? ' (admin)' : '') }),
      h('td', { 'data-label': 'Since' }, h('time', { datetime: u.created_at, text: when(u.created_at) })),
      h('td', { 'data-label': 'State' }, badge(u.disabled ? 'failed' : 'running', u.disabled ? 'disabled' : 'active')),
      h('td', { 'data-label': 'Actions' },
        h('button', { type: 'button', 'aria-label': `Reset the password of ${u.email}`, text: 'Reset password', onclick: () => ctx.run(async () => {
          const next = window.prompt(`New password for ${u.email} (at least 8 characters; their sessions end)`);
          if (!next) return;
          await call('PATCH', `/users/${u.id}`, { password: next });
          ctx.report({ message: `password of ${u.email} reset` });
        }) }),
        ' ',
        h('button', { type: 'button', 'aria-label': `${u.disabled ? 'Enable' : 'Disable'} ${u.email}`, text: u.disabled ? 'Enable' : 'Disable', onclick: () => ctx.run(async () => {
          await call('PATCH', `/users/${u.id}`, { disabled: !u.disabled });
          await load();
        }) })))));
  };
  ctx.run(load);
}

export function renderAllTunnels(view, ctx) {
  const rows = h('tbody', { id: 'all-tunnel-rows' });
  const empty = h('p', { class: 'empty', id: 'all-tunnels-empty', hidden: true, text: 'No live tunnels on this instance.' });
  view.append(h('section', { class: 'card', id: 'all-tunnels' },
    h('h1', { text: 'All tunnels' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Owner', 'Name', 'Since', 'State', 'Open streams'].map((t) => h('th', { scope: 'col', text: t })))), rows),
    empty));
  ctx.poll(3000, async (signal) => {
    const tunnels = await callAll('/tunnels?all=true', { signal });
    empty.hidden = tunnels.length > 0;
    replaceKeepingFocus(rows, tunnels.map((t) => h('tr', {},
      h('td', { 'data-label': 'Owner', text: t.owner_email }),
      h('td', { 'data-label': 'Name' }, h('a', { href: t.url, text: t.subdomain, rel: 'noopener noreferrer', target: '_blank' })),
      h('td', { 'data-label': 'Since' }, h('time', { datetime: t.connected_at, text: when(t.connected_at) })),
      h('td', { 'data-label': 'State' }, badge(t.state === 'connected' ? 'running' : 'building', t.state)),
      h('td', { 'data-label': 'Open streams', text: String(t.streams) }))));
  });
}
