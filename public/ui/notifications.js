// The Notifications page: channels (Slack, Discord, signed webhook, e-mail) of the user or the switcher's team, the events each gets, a test button and the last deliveries.
import { call } from './api.js';
import { badge, confirmAction, h, replaceKeepingFocus, when } from './dom.js';
import { currentTeam, inCurrentTeam, teamForNewApp } from './teams.js';

const EVENTS = [
  ['deploy.succeeded', 'Deploy succeeded'], ['deploy.failed', 'Deploy failed'], ['app.crashed', 'App crash-looping'],
  ['backup.failed', 'Backup failed'], ['backup.verified', 'Backup verified'], ['job.failed', 'Job failed'],
  ['certificate.failed', 'Certificate failed'], ['node.down', 'Node down'],
];
const TYPES = [['slack', 'Slack'], ['discord', 'Discord'], ['webhook', 'Webhook (signed JSON)'], ['email', 'E-mail']];

export function renderNotifications(view, ctx) {
  const name = h('input', { name: 'name', required: true, maxlength: '100', placeholder: 'ops', autocomplete: 'off' });
  const type = h('select', { name: 'type' }, TYPES.map(([value, label]) => h('option', { value, text: label })));
  const target = h('input', { name: 'target', required: true, maxlength: '2048', placeholder: 'the incoming-webhook URL (hooks.slack.com/services/…)', autocomplete: 'off', 'aria-label': 'URL' });
  const targetLabel = h('label', {}, h('span', { text: 'URL' }), target);
  type.onchange = () => {
    const email = type.value === 'email';
    targetLabel.firstChild.textContent = email ? 'E-mail address' : 'URL';
    target.setAttribute('aria-label', email ? 'E-mail address' : 'URL');
    target.type = email ? 'email' : 'url';
    // No scheme written out: the dashboard's modules name no other origin (test/api/dashboard).
    target.placeholder = email ? 'oncall@example.com' : 'the channel\'s URL';
  };
  const boxes = EVENTS.map(([value, label]) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'events', value }), ` ${label}`));
  const secret = h('pre', { class: 'snippet', id: 'channel-secret', hidden: true });
  const status = h('p', { id: 'channel-status', role: 'status' });
  const DEFAULT_EVENTS = ['deploy.failed', 'app.crashed'];
  const resetEvents = () => { for (const b of boxes) { const i = b.querySelector('input'); i.checked = DEFAULT_EVENTS.includes(i.value); } };
  const team = teamForNewApp();
  const form = h('form', { id: 'channel-form' },
    h('div', { class: 'row' }, h('label', {}, 'Name', name), h('label', {}, 'Type', type), targetLabel),
    h('fieldset', {}, h('legend', { text: 'Events' }), ...boxes),
    h('button', { class: 'primary', text: team ? 'Add team channel' : 'Add channel' }));
  const rows = h('tbody', { id: 'channel-rows' });
  const empty = h('p', { class: 'empty', id: 'channels-empty', hidden: true, text: 'No channels yet. Add one to hear about failed deploys, crash loops, backups and jobs without opening the dashboard.' });
  const details = h('div', { id: 'channel-details' });
  view.append(h('section', { class: 'card', id: 'notifications' },
    h('h1', { text: 'Notifications' }),
    form,
    secret,
    status,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Name', 'Type', 'To', 'Events', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    empty,
    details));

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(async () => {
      const events = boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
      const body = { name: name.value, type: type.value, events, ...(type.value === 'email' ? { email: target.value } : { url: target.value }), ...(team ? { team_id: team } : {}) };
      const created = await call('POST', '/notification-channels', body);
      form.reset();
      resetEvents();
      type.onchange();
      secret.hidden = !created.secret;
      secret.textContent = created.secret ? `Signing secret of ${created.name} (shown once; each delivery carries X-Slipway-Signature-256: sha256=<HMAC-SHA256 of the body>):\n${created.secret}` : '';
      last = '';
      await load(ctx.signal);
    });
  });

  resetEvents();
  let last = '';
  let open = null;
  const load = async (signal) => {
    const scope = currentTeam();
    const list = (await call('GET', '/notification-channels', undefined, { signal })).filter(inCurrentTeam);
    const sig = JSON.stringify(list) + scope + (open ?? '');
    if (sig === last) return;
    last = sig;
    empty.hidden = list.length > 0;
    replaceKeepingFocus(rows, list.map((c) => h('tr', { 'data-id': c.id },
      h('td', { 'data-label': 'Name', text: c.name }),
      h('td', { 'data-label': 'Type', text: c.type }),
      h('td', { 'data-label': 'To' }, h('code', { text: c.url ?? c.email ?? '' })),
      h('td', { 'data-label': 'Events', text: c.events.join(', ') }),
      h('td', {},
        h('button', { 'data-key': `test-${c.id}`, text: 'Test', onclick: () => ctx.run(async () => {
          const result = await call('POST', `/notification-channels/${c.id}/test`);
          ctx.report(result.ok ? null : { message: `test to ${c.name} failed: ${result.error ?? result.status_code}` });
          status.textContent = result.ok ? `Test message sent to ${c.name}${result.status_code ? ` (answered ${result.status_code})` : ''}.` : '';
          if (open === c.id) await showDeliveries(c);
        }) }),
        ' ',
        h('button', { 'data-key': `open-${c.id}`, text: open === c.id ? 'Hide' : 'Deliveries', onclick: () => ctx.run(async () => {
          open = open === c.id ? null : c.id;
          last = '';
          if (open) await showDeliveries(c); else details.replaceChildren();
          await load(ctx.signal);
        }) }),
        ' ',
        h('button', { class: 'danger', 'data-key': `delete-${c.id}`, text: 'Delete', onclick: () => ctx.run(async () => {
          if (!(await confirmAction({ title: `Delete ${c.name}?`, body: 'It stops receiving notifications; its delivery log goes with it.', confirm: 'Delete channel' }))) return;
          await call('DELETE', `/notification-channels/${c.id}`);
          if (open === c.id) { open = null; details.replaceChildren(); }
          last = '';
          await load(ctx.signal);
        }) })))));
  };

  const showDeliveries = async (c) => {
    const list = await call('GET', `/notification-channels/${c.id}/deliveries`, undefined, { signal: ctx.signal });
    details.replaceChildren(h('section', { class: 'card', id: 'channel-deliveries' },
      h('h2', { text: `Last deliveries to ${c.name}` }),
      list.length === 0
        ? h('p', { class: 'empty', text: 'Nothing sent yet.' })
        : h('table', { class: 'stack' },
          h('thead', {}, h('tr', {}, ['When', 'Event', 'Outcome', 'Attempts', 'Status', 'Error'].map((t) => h('th', { scope: 'col', text: t })))),
          h('tbody', {}, list.map((d) => h('tr', {},
            h('td', { 'data-label': 'When' }, h('time', { datetime: d.at, text: when(d.at) })),
            h('td', { 'data-label': 'Event', text: d.event }),
            h('td', { 'data-label': 'Outcome' }, badge(d.outcome === 'delivered' ? 'running' : d.outcome === 'failed' ? 'failed' : 'building', d.outcome)),
            h('td', { 'data-label': 'Attempts', text: String(d.attempts) }),
            h('td', { 'data-label': 'Status', text: d.status_code == null ? '' : String(d.status_code) }),
            h('td', { 'data-label': 'Error', text: d.error ?? '' })))))));
  };

  ctx.poll(5000, async (signal) => {
    await load(signal);
    if (open) {
      const c = (await call('GET', `/notification-channels/${open}`, undefined, { signal }).catch(() => null));
      if (c) await showDeliveries(c);
    }
  });
}
