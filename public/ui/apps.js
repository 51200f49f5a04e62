// The deployment list (live statuses) and the create page (git form, or a folder / tar.gz upload with progress).
import { call, callAll, uploadArchive } from './api.js';
import { badge, bytes, h, replaceKeepingFocus, when } from './dom.js';
import { packFolder } from './tar.js';
import { checkUploadSize } from './upload-limit.js';
import { inCurrentTeam, teamForNewApp } from './teams.js';
import { statusBadges } from './app-state.js';

/** The list of the user's deployments, polled so statuses change without a reload. */
export function renderList(view, ctx) {
  const rows = h('tbody', { id: 'app-rows' });
  const empty = h('p', { class: 'empty', hidden: true }, 'No apps yet. ', h('a', { href: '#/new', text: 'Create your first app' }), ' or run ', h('code', { text: 'slipway deploy' }), ' in a folder.');
  view.append(
    h('section', { class: 'card', id: 'apps' },
      h('div', { class: 'spread' }, h('h1', { text: 'Apps' }), h('a', { class: 'button', href: '#/new', text: 'New app' })),
      h('table', { class: 'stack' },
        h('thead', {}, h('tr', {}, ['Name', 'Status', 'URL', 'Source', 'Last deploy'].map((t) => h('th', { scope: 'col', text: t })))),
        rows),
      empty),
  );
  let last = '';
  ctx.poll(3000, async (signal) => {
    // The team switcher narrows the list (all apps, personal ones, or one team's).
    const apps = (await callAll('/deployments', { signal })).filter(inCurrentTeam);
    // The minute is part of it so "3 min ago" moves on even when nothing else changed.
    const signature = JSON.stringify(apps) + Math.floor(Date.now() / 60000);
    if (signature === last) return;
    last = signature;
    empty.hidden = apps.length > 0;
    replaceKeepingFocus(rows, apps.map((app) => h('tr', { dataset: { id: app.id, status: app.status } },
      h('td', { 'data-label': 'Name' }, h('a', { href: `#/d/${app.id}`, text: app.name, dataset: { key: `open-${app.id}` } })),
      h('td', { 'data-label': 'Status', class: 'status' }, statusBadges(app)),
      h('td', { 'data-label': 'URL' }, app.url ? h('a', { href: app.url, text: app.url.replace(/^https?:\/\//, ''), rel: 'noopener noreferrer', target: '_blank' }) : '—'),
      h('td', { 'data-label': 'Source' }, app.source_type === 'git' ? `git ${app.branch || '(default branch)'}` : 'upload'),
      h('td', { 'data-label': 'Last deploy' }, h('time', { datetime: app.updated_at, title: new Date(app.updated_at).toLocaleString(), text: when(app.updated_at) })),
    )));
  });
}

/** What a subdomain may be (the API's rule), said where the browser would say "match the requested format". */
export const SUBDOMAIN_RULE = 'A subdomain is 1 to 63 letters, digits and dashes, and starts and ends with a letter or digit (e.g. my-app-2).';

/** A subdomain suggested from a name: lower case, a-z 0-9 and dashes. */
function suggestSubdomain(name) {
  return name.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63);
}

/**
 * Packs (a folder) or takes (a .tar.gz) the chosen source, uploads it with progress shown in
 * `status`/`bar`, and resolves with the upload's answer.
 */
export async function uploadChosen(chosen, deploymentId, status, bar, signal) {
  return sendPacked(await packChosen(chosen, status), deploymentId, status, bar, signal);
}

/** The chosen source as a .tar.gz blob, refused (before anything is sent) when larger than the server's upload limit. */
export async function packChosen({ folder, archive }, status) {
  let blob;
  if (folder && folder.length > 0) {
    status.textContent = `Packing ${folder.length} files…`;
    const packed = await packFolder(folder);
    blob = packed.blob;
    status.textContent = `Packed ${packed.files} files (${bytes(blob.size)} compressed${packed.skipped ? `, ${packed.skipped} left out by .dockerignore or .git` : ''}).`;
  } else if (archive) {
    blob = archive;
  } else {
    throw new Error('choose a folder or a .tar.gz archive to upload');
  }
  await checkUploadSize(blob.size);
  return blob;
}

/** Uploads a packed source with progress shown in `status`/`bar`; resolves with the upload's answer. */
export async function sendPacked(blob, deploymentId, status, bar, signal) {
  bar.hidden = false;
  bar.value = 0;
  bar.max = blob.size;
  const result = await uploadArchive(deploymentId, blob, (sent, total) => {
    bar.max = total;
    bar.value = sent;
    status.textContent = `Uploading… ${bytes(sent)} of ${bytes(total)} (${Math.floor((sent / total) * 100)} %)`;
  }, signal);
  status.textContent = `Uploaded ${bytes(result.size)}.`;
  return result;
}

/** The source picker of an upload: a folder or a .tar.gz file. */
export function sourcePicker() {
  const folder = h('input', { type: 'file', name: 'folder', webkitdirectory: true, multiple: true });
  const archive = h('input', { type: 'file', name: 'archive', accept: '.tar.gz,.tgz,application/gzip' });
  const node = h('fieldset', { class: 'source-pick' },
    h('legend', { text: 'Source' }),
    h('label', {}, 'A folder (packed as .tar.gz in your browser; .dockerignore is honoured)', folder),
    h('label', {}, 'or a .tar.gz archive', archive));
  folder.addEventListener('change', () => { if (folder.files.length) archive.value = ''; });
  archive.addEventListener('change', () => { if (archive.files.length) folder.value = ''; });
  return { node, chosen: () => ({ folder: folder.files, archive: archive.files[0] }) };
}

/** Create a deployment: from a git repository, or from an upload; then deploy it and open its page. */
export function renderNew(view, ctx) {
  const kind = h('select', { name: 'source_type' }, h('option', { value: 'git', text: 'Git repository' }), h('option', { value: 'archive', text: 'Upload a folder or .tar.gz' }));
  const name = h('input', { name: 'name', required: true, maxlength: '100', autocomplete: 'off' });
  const subdomain = h('input', { name: 'subdomain', required: true, maxlength: '63', pattern: '[A-Za-z0-9]([A-Za-z0-9\\-]*[A-Za-z0-9])?', title: SUBDOMAIN_RULE, 'aria-describedby': 'subdomain-rule', autocomplete: 'off', spellcheck: 'false' });
  let touched = false;
  name.addEventListener('input', () => { if (!touched) subdomain.value = suggestSubdomain(name.value); });
  subdomain.addEventListener('input', () => { touched = true; });
  // The rule in words, instead of the browser's "match the requested format".
  const checkSubdomain = () => subdomain.setCustomValidity(subdomain.validity.patternMismatch ? SUBDOMAIN_RULE : '');
  subdomain.addEventListener('input', checkSubdomain);
  name.addEventListener('input', checkSubdomain);
  const repo = h('input', { name: 'repo_url', type: 'text', inputmode: 'url', placeholder: 'https://github.com/you/app.git', spellcheck: 'false' });
  const branch = h('input', { name: 'branch', placeholder: 'the default branch', spellcheck: 'false' });
  const dockerfile = h('input', { name: 'dockerfile_path', placeholder: 'Dockerfile', spellcheck: 'false' });
  const compose = h('input', { name: 'compose_path', placeholder: 'compose.yaml', spellcheck: 'false' });
  const gitFields = h('div', {}, h('label', {}, 'Repository URL', repo), h('label', {}, 'Branch (optional)', branch));
  const picker = sourcePicker();
  picker.node.hidden = true;
  const status = h('p', { class: 'note', role: 'status', 'aria-live': 'polite' });
  const bar = h('progress', { hidden: true, 'aria-label': 'Upload progress' });
  const submit = h('button', { class: 'primary', text: 'Create and deploy' });
  kind.addEventListener('change', () => {
    const git = kind.value === 'git';
    gitFields.hidden = !git;
    picker.node.hidden = git;
    repo.required = git;
  });
  repo.required = true;
  const form = h('form', { id: 'new-form' },
    h('label', {}, 'Name', name),
    h('label', {}, 'Subdomain', subdomain, h('span', { class: 'hint', id: 'subdomain-rule', text: 'Letters, digits and dashes; not starting or ending with a dash.' })),
    h('label', {}, 'Source', kind),
    gitFields, picker.node,
    h('label', {}, 'Dockerfile path (optional)', dockerfile),
    h('label', {}, 'Compose file (optional: runs its services instead of a Dockerfile)', compose),
    h('div', { class: 'row' }, submit), bar, status);
  // A server error is about what was sent: once the form changes, it no longer applies.
  form.addEventListener('input', () => ctx.report(null));
  form.addEventListener('change', () => ctx.report(null));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit.disabled = true;
    ctx.run(async () => {
      try {
        const body = { name: name.value, subdomain: subdomain.value, source_type: kind.value };
        if (dockerfile.value.trim()) body.dockerfile_path = dockerfile.value.trim();
        if (compose.value.trim()) body.compose_path = compose.value.trim();
        if (kind.value === 'git') {
          body.repo_url = repo.value.trim();
          if (branch.value.trim()) body.branch = branch.value.trim();
        } else {
          const chosen = picker.chosen();
          if (!(chosen.folder && chosen.folder.length) && !chosen.archive) throw new Error('choose a folder or a .tar.gz archive to upload');
        }
        // Packed and measured before the app is created: a source over the limit leaves nothing behind.
        const packed = kind.value === 'archive' ? await packChosen(picker.chosen(), status) : null;
        const created = await call('POST', '/deployments', teamForNewApp() ? { ...body, team_id: teamForNewApp() } : body);
        if (packed) {
          try {
            await sendPacked(packed, created.id, status, bar, ctx.signal);
          } catch (err) {
            // The deployment exists: its page can take another upload.
            status.replaceChildren('The app was created; ', h('a', { href: `#/d/${created.id}/builds`, text: 'open its page' }), ' to upload again.');
            throw err;
          }
        }
        status.textContent = 'Starting the first build…';
        await call('POST', `/deployments/${created.id}/deploy`);
        // The first build's log is what a new app's owner wants to watch.
        location.hash = `#/d/${created.id}/builds`;
      } finally {
        submit.disabled = false;
      }
    });
  });
  view.append(h('section', { class: 'card' }, h('h1', { text: 'New app' }), form));
}
