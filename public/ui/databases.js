// The Databases page: create a managed database, its status and size kept current, credentials revealed on demand, its links, a command to copy, stop/start/delete; its backups and the destinations (backups.js).
import { call, callAll } from './api.js';
import { renderDatabaseBackups, renderDestinations } from './backups.js';
import { badge, bytes, confirmAction, h, replaceKeepingFocus, when } from './dom.js';

const ENGINES = [['postgres', 'PostgreSQL'], ['mysql', 'MySQL (MariaDB)'], ['redis', 'Redis']];

/** The command a person types to work with the database from a linked app's shell (the database has no public address). */
function clientCommand(db) {
  if (db.engine === 'postgres') return 'psql "$DATABASE_URL"';
  if (db.engine === 'mysql') return 'mariadb --host=' + db.host + ' --user=app --password';
  return 'redis-cli -u "$DATABASE_URL"';
}

/** A client on the user's machine through `slipway db connect` (its listener takes the engine's own port). */
function localCommand(db) {
  if (db.engine === 'postgres') return `psql -h 127.0.0.1 -p ${db.port} -U USER DATABASE`;
  if (db.engine === 'mysql') return `mariadb --host=127.0.0.1 --port=${db.port} --user=USER --password DATABASE`;
  return `redis-cli -h 127.0.0.1 -p ${db.port} --pass PASSWORD`;
}

export function renderDatabases(view, ctx) {
  const name = h('input', { name: 'name', required: true, maxlength: '63', pattern: '[a-z0-9]([a-z0-9-]*[a-z0-9])?', placeholder: 'main', autocomplete: 'off' });
  const engine = h('select', { name: 'engine' }, ENGINES.map(([value, label]) => h('option', { value, text: label })));
  const form = h('form', { id: 'database-form', class: 'row' },
    h('label', {}, 'Name', name), h('label', {}, 'Engine', engine), h('button', { class: 'primary', text: 'Create database' }));
  const rows = h('tbody', { id: 'database-rows' });
  const empty = h('p', { class: 'empty', id: 'databases-empty', hidden: true, text: 'No databases yet. A database is reachable only from the apps you link it to.' });
  const details = h('div', { id: 'database-details' });
  view.append(h('section', { class: 'card', id: 'databases' },
    h('h1', { text: 'Databases' }),
    form,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Name', 'Engine', 'Status', 'Size', 'Created', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    empty,
    details));
  let backups = null;
  let backupsOpen = new AbortController();
  view.append(renderDestinations(ctx, () => backups?.destinationsChanged()));

  let last = '';
  let open = null;
  const load = async (signal) => {
    const list = await callAll('/databases', { signal });
    const sig = JSON.stringify(list) + Math.floor(Date.now() / 60000) + (open ?? '');
    if (sig === last) return;
    last = sig;
    empty.hidden = list.length > 0;
    replaceKeepingFocus(rows, list.map((db) => h('tr', { 'data-id': db.id },
      h('td', { 'data-label': 'Name' }, h('code', { text: db.name })),
      h('td', { 'data-label': 'Engine', text: db.engine }),
      h('td', { 'data-label': 'Status' }, badge(db.status === 'creating' ? 'building' : db.status === 'stopped' ? 'stopped' : db.status, db.status), db.error ? h('span', { class: 'muted', text: ` ${db.error}` }) : ''),
      h('td', { 'data-label': 'Size', text: bytes(db.size_bytes) }),
      h('td', { 'data-label': 'Created' }, h('time', { datetime: db.created_at, text: when(db.created_at) })),
      h('td', {}, h('button', { 'data-key': `open-${db.id}`, text: open === db.id ? 'Hide' : 'Details', onclick: () => ctx.run(async () => {
        open = open === db.id ? null : db.id;
        last = '';
        backupsOpen.abort();
        backups = null;
        if (open) await showDetails(db); else details.replaceChildren();
        await load(ctx.signal);
      }) })))));
  };

  const showDetails = async (db) => {
    const links = [];
    for (const app of await callAll('/deployments', { signal: ctx.signal })) {
      for (const link of await call('GET', `/deployments/${app.id}/databases`, undefined, { signal: ctx.signal })) {
        if (link.database_id === db.id) links.push(`${app.name} (${link.env})`);
      }
    }
    const secret = h('pre', { class: 'snippet', id: 'database-credentials', hidden: true });
    const reveal = h('button', { id: 'reveal-credentials', text: 'Reveal credentials', onclick: () => ctx.run(async () => {
      const creds = await call('GET', `/databases/${db.id}/credentials`);
      secret.textContent = `user:     ${creds.username}\npassword: ${creds.password}\ndatabase: ${creds.database}\nhost:     ${creds.host}:${creds.port}\nurl:      ${creds.url}`;
      secret.hidden = false;
      reveal.hidden = true;
    }) });
    const action = (label, verb, danger) => h('button', { class: danger ? 'danger' : '', text: label, onclick: () => ctx.run(async () => {
      if (verb === 'delete') {
        if (!(await confirmAction({ title: `Delete ${db.name}?`, body: 'Its container and ALL its data are deleted. Linked apps lose it.', confirm: 'Delete database' }))) return;
        await call('DELETE', `/databases/${db.id}?force=true`);
        backupsOpen.abort();
        open = null;
        details.replaceChildren();
      } else {
        await call('POST', `/databases/${db.id}/${verb}`);
      }
      last = '';
      await load(ctx.signal);
    }) });
    details.replaceChildren(h('section', { class: 'card', id: 'database-detail' },
      h('h2', { text: db.name }),
      h('p', {}, `${db.engine} · ${db.image} · host `, h('code', { text: `${db.host}:${db.port}` }), ' (reachable only from linked apps)'),
      h('p', { text: links.length === 0 ? 'Not linked to any app.' : `Linked to ${links.join(', ')}.` }),
      h('p', {}, 'Link it to an app (its URL reaches the app as a secret variable from the next deploy or restart):'),
      h('pre', { class: 'snippet', text: `slipway db link ${db.name} --app APP\nslipway db credentials ${db.name}\n# from a linked app's shell:\n${clientCommand(db)}` }),
      h('p', {}, 'Reach it from your machine (no port is published: the CLI carries each connection through the API; Ctrl-C ends it):'),
      h('pre', { class: 'snippet', id: 'database-connect', text: `slipway db connect ${db.name}\n# then, in another terminal, with its credentials:\n${localCommand(db)}` }),
      reveal, secret,
      h('div', { class: 'row' }, action('Stop', 'stop'), action('Start', 'start'), action('Delete', 'delete', true)),
      (backups = renderDatabaseBackups(db, ctx, (backupsOpen = new AbortController()).signal)).section));
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(async () => {
      await call('POST', '/databases', { name: name.value, engine: engine.value });
      form.reset();
      last = '';
      await load(ctx.signal);
    });
  });
  ctx.poll(3000, load);
}
