// Backups on the Databases page: destinations (add, test, delete), and in a database's details its schedule, its backups with their verified status, download, "back up now" and restore with a confirmation naming what is replaced.
import { call, callAll } from './api.js';
import { badge, bytes, confirmAction, h, replaceKeepingFocus, when } from './dom.js';

/** A backup's status as a badge: verified (seen to restore) green, running and verifying yellow. */
function backupBadge(b) {
  if (b.status === 'verified') return badge('running', 'verified');
  if (b.status === 'succeeded') return badge('building', 'verifying');
  return badge(b.status === 'running' ? 'building' : 'failed', b.status);
}

const stamp = (iso) => iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC');

/** The destinations section: its form, its list with Test and Delete. Calls `changed()` after a change (the databases' forms list them). */
export function renderDestinations(ctx, changed) {
  const field = (name, label, props = {}) => {
    const input = h('input', { name, autocomplete: 'off', ...props });
    return { input, label: h('label', { 'data-s3': '' }, label, input) };
  };
  const name = h('input', { name: 'name', required: true, maxlength: '100', placeholder: 'Offsite S3', autocomplete: 'off' });
  const type = h('select', { name: 'type' }, h('option', { value: 's3', text: 'S3-compatible bucket' }), h('option', { value: 'local', text: 'This server (local)' }));
  const endpoint = field('endpoint', 'Endpoint', { type: 'url', placeholder: 'the S3 endpoint URL' });
  const region = field('region', 'Region', { placeholder: 'us-east-1' });
  const bucket = field('bucket', 'Bucket');
  const prefix = field('prefix', 'Prefix', { placeholder: 'optional' });
  const keyId = field('access_key_id', 'Access key id');
  const secret = field('secret_access_key', 'Secret access key', { type: 'password' });
  const pathStyle = h('input', { type: 'checkbox', name: 'force_path_style' });
  const s3Fields = [endpoint, region, bucket, prefix, keyId, secret];
  const pathLabel = h('label', { class: 'check', 'data-s3': '' }, pathStyle, ' Path-style addressing (most self-hosted servers)');
  type.onchange = () => {
    const s3 = type.value === 's3';
    for (const f of s3Fields) {
      f.label.hidden = !s3;
      f.input.required = s3 && f !== prefix && f !== region;
    }
    pathLabel.hidden = !s3;
  };
  const form = h('form', { id: 'destination-form' },
    h('div', { class: 'row' }, h('label', {}, 'Name', name), h('label', {}, 'Type', type)),
    h('div', { class: 'row' }, ...s3Fields.map((f) => f.label)),
    pathLabel,
    h('button', { class: 'primary', text: 'Add destination' }));
  const rows = h('tbody', { id: 'destination-rows' });
  const empty = h('p', { class: 'empty', id: 'destinations-empty', hidden: true, text: 'No backup destinations yet. Backups go to an S3-compatible bucket (or, for one server, a directory of it).' });
  const status = h('p', { id: 'destination-status', role: 'status' });
  const section = h('section', { class: 'card', id: 'backup-destinations' },
    h('h2', { text: 'Backup destinations' }), form, status,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Name', 'Type', 'Where', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    empty);

  let last = '';
  const load = async (signal) => {
    const list = await callAll('/backup-destinations', { signal });
    const sig = JSON.stringify(list);
    if (sig === last) return;
    last = sig;
    empty.hidden = list.length > 0;
    replaceKeepingFocus(rows, list.map((d) => h('tr', { 'data-id': d.id },
      h('td', { 'data-label': 'Name', text: d.name }),
      h('td', { 'data-label': 'Type', text: d.type }),
      h('td', { 'data-label': 'Where' }, d.type === 's3' ? h('code', { text: `${d.bucket}/${d.prefix ?? ''} at ${d.endpoint}` }) : 'this server'),
      h('td', {},
        h('button', { 'data-key': `test-${d.id}`, text: 'Test', onclick: () => ctx.run(async () => {
          status.textContent = `Testing ${d.name}…`;
          const result = await call('POST', `/backup-destinations/${d.id}/test`);
          status.textContent = result.ok ? `${d.name} works: a probe object was written, read back and deleted.` : '';
          ctx.report(result.ok ? null : { message: `${d.name} failed at ${result.step}: ${result.message}` });
        }) }),
        ' ',
        h('button', { class: 'danger', 'data-key': `delete-${d.id}`, text: 'Delete', onclick: () => ctx.run(async () => {
          if (!(await confirmAction({ title: `Delete destination ${d.name}?`, body: 'Slipway forgets it; the backups already in it stay where they are.', confirm: 'Delete destination' }))) return;
          await call('DELETE', `/backup-destinations/${d.id}`);
          last = '';
          await load(ctx.signal);
          changed();
        }) })))));
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(async () => {
      const body = { name: name.value, type: type.value };
      if (type.value === 's3') {
        Object.assign(body, { endpoint: endpoint.input.value, bucket: bucket.input.value, access_key_id: keyId.input.value, secret_access_key: secret.input.value, force_path_style: pathStyle.checked });
        if (region.input.value) body.region = region.input.value;
        if (prefix.input.value) body.prefix = prefix.input.value;
      }
      const created = await call('POST', '/backup-destinations', body);
      form.reset();
      type.onchange();
      status.textContent = `Added ${created.name}. Test it before the first backup.`;
      last = '';
      await load(ctx.signal);
      changed();
    });
  });
  type.onchange();
  ctx.poll(10000, load);
  return section;
}

/** A database's backups (its details): schedule, back up now, the list with download and restore. Polls until `signal` ends. */
export function renderDatabaseBackups(db, ctx, signal) {
  const destinationSelect = (id) => h('select', { id }, h('option', { value: '', text: '— choose a destination —' }));
  const cron = h('input', { id: 'schedule-cron', name: 'schedule', required: true, maxlength: '200', placeholder: '0 3 * * *', autocomplete: 'off' });
  const scheduleDestination = destinationSelect('schedule-destination');
  scheduleDestination.required = true;
  const keep = h('input', { id: 'schedule-keep', name: 'keep', type: 'number', min: '1', max: '365', value: '7' });
  const scheduleText = h('p', { id: 'schedule-now' });
  const scheduleForm = h('form', { id: 'schedule-form' },
    h('div', { class: 'row' },
      h('label', {}, 'Schedule (cron, UTC)', cron),
      h('label', {}, 'Destination', scheduleDestination),
      h('label', {}, 'Keep (verified)', keep),
      h('button', { class: 'primary', text: 'Save schedule' })));
  const removeSchedule = h('button', { id: 'schedule-remove', text: 'Remove schedule', hidden: true, onclick: () => ctx.run(async () => {
    await call('PATCH', `/databases/${db.id}`, { backup: null });
    await refresh();
  }) });
  const nowDestination = destinationSelect('backup-destination');
  const backupNow = h('button', { id: 'backup-now', class: 'primary', text: 'Back up now', onclick: () => ctx.run(async () => {
    await call('POST', `/databases/${db.id}/backups`, nowDestination.value ? { destination_id: nowDestination.value } : {});
    await loadBackups(signal);
  }) });
  const intoName = h('input', { id: 'restore-into', name: 'into', maxlength: '63', placeholder: 'leave empty to replace the data', autocomplete: 'off', 'aria-label': 'Restore into a new database named' });
  const rows = h('tbody', { id: 'backup-rows' });
  const empty = h('p', { class: 'empty', id: 'backups-empty', hidden: true, text: 'No backups yet.' });
  const restoreStatus = h('p', { id: 'restore-status', role: 'status' });
  const section = h('section', { id: 'database-backups' },
    h('h3', { text: 'Backups' }),
    scheduleText, scheduleForm, removeSchedule,
    h('div', { class: 'row' }, h('label', {}, 'Back up into', nowDestination), backupNow),
    h('label', {}, 'Restore into a new database named', intoName),
    restoreStatus,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Status', 'Trigger', 'Size', 'Started', 'Verified', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    empty);

  const restore = (b) => ctx.run(async () => {
    const into = intoName.value.trim();
    const taken = stamp(b.started_at);
    const ok = into
      ? await confirmAction({ title: `Restore into a new database ${into}?`, body: `A new database ${into} is created with the data of ${db.name}'s backup of ${taken}. ${db.name} is not changed.`, confirm: 'Restore', danger: false })
      : await confirmAction({ title: `Replace all the data of ${db.name}?`, body: `ALL the data of database ${db.name} is replaced with its backup of ${taken}. A safety backup of the current data is taken first; apps linked to it restart.`, confirm: `Replace ${db.name}'s data` });
    if (!ok) return;
    const started = await call('POST', `/databases/${db.id}/restore`, { backup_id: b.id, ...(into ? { into } : {}) });
    restoreStatus.textContent = `Restoring the backup of ${taken} into ${into || db.name}…`;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const r = await call('GET', `/databases/${db.id}/restores/${started.id}`, undefined, { signal });
      if (r.status === 'running') continue;
      restoreStatus.textContent = r.status === 'succeeded' ? `Restored the backup of ${taken} into ${into || db.name}.` : '';
      if (r.status !== 'succeeded') ctx.report({ message: `the restore failed: ${r.error}` });
      break;
    }
    intoName.value = '';
    await loadBackups(signal);
  });

  let last = '';
  const loadBackups = async (s) => {
    const list = await callAll(`/databases/${db.id}/backups`, { signal: s });
    const sig = JSON.stringify(list) + Math.floor(Date.now() / 60000);
    if (sig === last) return;
    last = sig;
    empty.hidden = list.length > 0;
    replaceKeepingFocus(rows, list.map((b) => h('tr', { 'data-id': b.id },
      h('td', { 'data-label': 'Status' }, backupBadge(b), b.error ? h('span', { class: 'muted', text: ` ${b.error}` }) : ''),
      h('td', { 'data-label': 'Trigger', text: b.trigger }),
      h('td', { 'data-label': 'Size', text: b.size_bytes == null ? '—' : bytes(b.size_bytes) }),
      h('td', { 'data-label': 'Started' }, h('time', { datetime: b.started_at, text: when(b.started_at) })),
      h('td', { 'data-label': 'Verified' }, b.verified_at ? h('time', { datetime: b.verified_at, text: when(b.verified_at) }) : '—'),
      h('td', {}, ...(b.status === 'verified' || b.status === 'succeeded'
        ? [h('a', { class: 'button', href: `/api/v1/databases/${db.id}/backups/${b.id}/download`, download: '', text: 'Download' }), ' ',
          h('button', { 'data-key': `restore-${b.id}`, text: 'Restore', onclick: () => restore(b) })]
        : [])))));
  };

  const refresh = async () => {
    const [current, destinations] = await Promise.all([call('GET', `/databases/${db.id}`, undefined, { signal }), callAll('/backup-destinations', { signal })]);
    for (const select of [scheduleDestination, nowDestination]) {
      const chosen = select.value;
      select.replaceChildren(select.firstChild, ...destinations.map((d) => h('option', { value: d.id, text: d.name })));
      select.value = chosen;
    }
    const s = current.backup;
    const named = s ? destinations.find((d) => d.id === s.destination_id) : null;
    scheduleText.textContent = s ? `Backed up ${s.schedule} (UTC) into ${named ? named.name : s.destination_id}, keeping ${s.keep} verified backups.` : 'No schedule: backups are taken only when asked.';
    removeSchedule.hidden = !s;
    if (s) {
      cron.value = s.schedule;
      scheduleDestination.value = s.destination_id;
      keep.value = String(s.keep);
      if (!nowDestination.value) nowDestination.value = s.destination_id;
    }
  };

  scheduleForm.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(async () => {
      await call('PATCH', `/databases/${db.id}`, { backup: { schedule: cron.value.trim(), destination_id: scheduleDestination.value, keep: Number(keep.value) } });
      await refresh();
    });
  });

  ctx.run(refresh);
  ctx.poll(3000, async (s) => {
    if (signal.aborted) return;
    await loadBackups(AbortSignal.any([s, signal]));
  });
  return { section, destinationsChanged: () => ctx.run(refresh) };
}
