// API keys (a new key shown once, with a copy button) and the password change.
import { call, callAll } from './api.js';
import { h, when } from './dom.js';
import { renderTwoFactor } from './two-factor.js';

/**
 * A new key's secret is shown once, until the next action: revoking any key, logging out, going to
 * another page, or leaving the page (also when the browser keeps the page for Back) clears it.
 */
export function forgetNewKey() {
  const box = document.getElementById('new-key');
  if (!box) return;
  box.replaceChildren();
  box.hidden = true;
}

export function renderKeys(view, ctx) {
  const rows = h('tbody', { id: 'key-rows' });
  const newKey = h('div', { id: 'new-key', class: 'new-key', hidden: true, role: 'status' });
  const name = h('input', { name: 'name', required: true, maxlength: '100', placeholder: 'laptop, CI…', autocomplete: 'off' });
  const form = h('form', { id: 'key-form', class: 'row' }, h('label', {}, 'Name of a new key', name), h('button', { class: 'primary', text: 'Create key' }));
  view.append(h('section', { class: 'card', id: 'keys' },
    h('h1', { text: 'API keys' }),
    h('p', { class: 'hint' }, 'Keys let the CLI and scripts act as you: ', h('code', { text: 'slipway login --api-key' }), '. A key is shown once, when created.'),
    form, newKey,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Name', 'Prefix', 'Created', 'Last used', ''].map((t) => h('th', { scope: 'col', text: t })))), rows)));

  async function load() {
    const keys = await callAll('/api-keys', { signal: ctx.signal });
    rows.replaceChildren(...keys.map((key) => h('tr', {},
      h('td', { 'data-label': 'Name', text: key.name }),
      h('td', { 'data-label': 'Prefix' }, h('code', { text: `${key.key_prefix}…` })),
      h('td', { 'data-label': 'Created', text: when(key.created_at) }),
      h('td', { 'data-label': 'Last used', text: key.last_used_at ? when(key.last_used_at) : 'never' }),
      h('td', {}, h('button', { type: 'button', text: 'Revoke', 'aria-label': `Revoke ${key.name}`, onclick: () => ctx.run(async () => {
        forgetNewKey();
        await call('DELETE', `/api-keys/${key.id}`);
        await load();
      }) })),
    )));
    if (keys.length === 0) {
      rows.replaceChildren(h('tr', { class: 'empty-row' }, h('td', { colspan: '5', class: 'empty' },
        h('p', {}, 'No API keys yet. A key lets the CLI, CI jobs and scripts act as you, and opens tunnels. Create one above, then:'),
        h('pre', { class: 'snippet', text: 'slipway login --url ' + location.origin + ' --api-key slw_k1_…\n# or, in CI: SLIPWAY_URL=' + location.origin + ' SLIPWAY_API_KEY=slw_k1_… slipway deploy' }))));
    }
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(async () => {
      const created = await call('POST', '/api-keys', { name: name.value });
      const secret = h('code', { class: 'secret-value', id: 'new-key-value', text: created.key });
      const copied = h('span', { class: 'muted', role: 'status' });
      newKey.replaceChildren(
        h('p', {}, h('strong', { text: 'New key (shown once): ' }), 'copy it now; it cannot be shown again.'),
        secret,
        h('div', { class: 'row' }, h('button', { type: 'button', text: 'Copy', onclick: async () => {
          try {
            await navigator.clipboard.writeText(created.key);
            copied.textContent = 'Copied.';
          } catch {
            getSelection().selectAllChildren(secret);
            copied.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
          }
        } }), copied));
      newKey.hidden = false;
      form.reset();
      await load();
    });
  });
  ctx.run(load);
}

export function renderAccount(view, ctx) {
  const current = h('input', { type: 'password', name: 'current_password', autocomplete: 'current-password', required: true });
  const next = h('input', { type: 'password', name: 'new_password', autocomplete: 'new-password', required: true, minlength: '8' });
  const again = h('input', { type: 'password', name: 'again', autocomplete: 'new-password', required: true, minlength: '8' });
  const done = h('p', { class: 'note', role: 'status' });
  const form = h('form', { id: 'password-form' },
    h('label', {}, 'Current password', current),
    h('label', {}, 'New password (8 characters or more)', next),
    h('label', {}, 'New password again', again),
    h('button', { class: 'primary', text: 'Change password' }), done);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    done.textContent = '';
    ctx.run(async () => {
      if (next.value !== again.value) throw new Error('the two new passwords differ');
      const { message } = await call('PUT', '/users/me/password', { current_password: current.value, new_password: next.value });
      form.reset();
      done.textContent = `${message[0].toUpperCase()}${message.slice(1)}. Your other sessions were logged out.`;
    });
  });
  const section = h('section', { class: 'card narrow' }, h('h1', { text: 'Account' }), h('h2', { text: 'Change password' }), form);
  view.append(section);
  renderTwoFactor(section, ctx);
}
