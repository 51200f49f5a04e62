// An app's configuration panels: environment (secrets masked, edit in place), domains with TLS, volumes, webhook, source upload.
import { call } from './api.js';
import { badge, confirmAction, h, replaceKeepingFocus, when } from './dom.js';
import { sourcePicker, uploadChosen } from './apps.js';

/** A panel with its own error line: a failure there (an endpoint this server lacks) shows the API's message in place. */
function panel(id, title, ...children) {
  const error = h('p', { class: 'panel-error', role: 'alert' });
  const node = h('section', { class: 'card', id, 'aria-labelledby': `${id}-title` }, h('h2', { id: `${id}-title`, text: title }), ...children, error);
  const run = async (fn) => {
    error.textContent = '';
    try { await fn(); } catch (err) { if (err.name !== 'AbortError') error.textContent = err.message; }
  };
  return { node, run, error };
}

const MASK = '••••••••';

function envPanel(id, ctx) {
  const rows = h('tbody', { id: 'env-rows' });
  const key = h('input', { name: 'key', required: true, maxlength: '256', autocomplete: 'off', spellcheck: 'false' });
  const value = h('input', { name: 'value', autocomplete: 'off', spellcheck: 'false' });
  const secret = h('input', { type: 'checkbox', name: 'secret' });
  const form = h('form', { id: 'env-form' },
    h('div', { class: 'grid' }, h('label', {}, 'Name', key), h('label', {}, 'Value', value)),
    h('div', { class: 'row' }, h('label', { class: 'inline' }, secret, 'Secret (write-only: never shown again)'), h('button', { class: 'primary', text: 'Add variable' })));
  const p = panel('env', 'Environment',
    h('p', { class: 'hint', text: 'A running app gets changes when it restarts (the bar at the top offers it); otherwise at the next deploy.' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Name', 'Value', ''].map((t) => h('th', { scope: 'col', text: t })))), rows), form);

  const patch = async (body) => {
    show(await call('PATCH', `/deployments/${id}/env`, body));
    ctx.configChanged();
  };
  function show(env) {
    rows.replaceChildren(...env.vars.map((v) => {
      const tr = h('tr', { dataset: { key: v.key } });
      const view = () => tr.replaceChildren(
        h('td', { 'data-label': 'Name' }, h('code', { text: v.key })),
        h('td', { 'data-label': 'Value' }, v.secret ? [h('span', { class: 'masked', text: MASK, 'aria-label': 'hidden' }), ' ', badge('secret')] : h('code', { class: 'value', text: v.value })),
        h('td', { class: 'actions' },
          h('button', { type: 'button', text: 'Edit', 'aria-label': `Edit ${v.key}`, onclick: edit }),
          h('button', { type: 'button', text: 'Remove', 'aria-label': `Remove ${v.key}`, onclick: () => p.run(async () => {
            if (await confirmAction({ title: `Remove ${v.key}?`, body: 'The variable is gone from the next deploy, restart or rollback.', confirm: 'Remove' })) await patch({ vars: { [v.key]: null } });
          }) })));
      const edit = () => {
        const input = h('input', { name: 'edit-value', value: v.secret ? '' : v.value, placeholder: v.secret ? 'new secret value' : '', 'aria-label': `New value of ${v.key}`, autocomplete: 'off', spellcheck: 'false' });
        const keepSecret = h('input', { type: 'checkbox', checked: v.secret });
        const save = () => p.run(() => patch({ vars: { [v.key]: input.value }, secret: keepSecret.checked }));
        input.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); view(); tr.querySelector('button')?.focus(); } if (e.key === 'Enter') { e.preventDefault(); save(); } });
        tr.replaceChildren(
          h('td', { 'data-label': 'Name' }, h('code', { text: v.key })),
          h('td', { 'data-label': 'Value' }, input, h('label', { class: 'inline' }, keepSecret, 'Secret')),
          h('td', { class: 'actions' }, h('button', { type: 'button', class: 'primary', text: 'Save', onclick: save }), h('button', { type: 'button', text: 'Cancel', onclick: () => { view(); tr.querySelector('button')?.focus(); } })));
        input.focus();
      };
      view();
      return tr;
    }));
    if (env.vars.length === 0) rows.replaceChildren(h('tr', {}, h('td', { colspan: '3', class: 'empty', text: 'No variables.' })));
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    p.run(async () => {
      await patch({ vars: { [key.value]: value.value }, secret: secret.checked });
      form.reset();
      key.focus();
    });
  });
  p.run(async () => show(await call('GET', `/deployments/${id}/env`, undefined, { signal: ctx.signal })));
  return p.node;
}

function domainsPanel(id, ctx) {
  const rows = h('tbody', { id: 'domain-rows' });
  const hostname = h('input', { name: 'hostname', required: true, placeholder: 'www.example.com', autocomplete: 'off', spellcheck: 'false', inputmode: 'url' });
  const form = h('form', { id: 'domain-form', class: 'row' }, h('label', {}, 'Custom domain', hostname), h('button', { class: 'primary', text: 'Add domain' }));
  const p = panel('domains', 'Domains',
    h('p', { class: 'hint', text: "Point the name's DNS (A/AAAA or CNAME) at this server; HTTPS follows when it is on." }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Domain', 'TLS', ''].map((t) => h('th', { scope: 'col', text: t })))), rows), form);
  let last = '';
  async function load(signal) {
    const domains = await call('GET', `/deployments/${id}/domains`, undefined, { signal });
    const sig = JSON.stringify(domains);
    if (sig === last) return;
    last = sig;
    rows.replaceChildren(...domains.map((d) => h('tr', {},
      h('td', { 'data-label': 'Domain' }, h('code', { text: d.hostname })),
      h('td', { 'data-label': 'TLS' }, badge(d.tls_status === 'pending' ? 'pending-tls' : d.tls_status, d.tls_status === 'none' ? 'no HTTPS' : d.tls_status),
        d.tls_error ? h('div', { class: 'muted', text: d.tls_error }) : '',
        d.certificate_expires_at ? h('div', { class: 'muted', text: `certificate until ${new Date(d.certificate_expires_at).toLocaleDateString()}` }) : ''),
      h('td', {}, h('button', { type: 'button', text: 'Remove', 'aria-label': `Remove ${d.hostname}`, onclick: () => p.run(async () => {
        if (!(await confirmAction({ title: `Remove ${d.hostname}?`, body: 'Requests for it stop reaching this app at once.', confirm: 'Remove' }))) return;
        await call('DELETE', `/deployments/${id}/domains/${d.id}`);
        await load(ctx.signal);
      }) })))));
    if (domains.length === 0) rows.replaceChildren(h('tr', {}, h('td', { colspan: '3', class: 'empty', text: 'No custom domains.' })));
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    p.run(async () => {
      await call('POST', `/deployments/${id}/domains`, { hostname: hostname.value });
      form.reset();
      await load(ctx.signal);
    });
  });
  // TLS status moves on its own (pending → active): keep it current.
  ctx.poll(5000, (signal) => p.run(() => load(signal)));
  return p.node;
}

function volumesPanel(id, getDep, onChange, configChanged) {
  const rows = h('tbody', { id: 'volume-rows' });
  const name = h('input', { name: 'name', required: true, maxlength: '63', placeholder: 'data', autocomplete: 'off', spellcheck: 'false' });
  const mount = h('input', { name: 'mount_path', required: true, placeholder: '/var/lib/app', autocomplete: 'off', spellcheck: 'false' });
  const form = h('form', { id: 'volume-form' }, h('div', { class: 'grid' }, h('label', {}, 'Volume name', name), h('label', {}, 'Mounted at', mount)), h('button', { class: 'primary', text: 'Add volume' }));
  const p = panel('volumes', 'Volumes',
    h('p', { class: 'hint', text: 'Data in a volume survives deploys, restarts and rollbacks; it is removed with the app. Changes apply at the next deploy or restart.' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Name', 'Mounted at', ''].map((t) => h('th', { scope: 'col', text: t })))), rows), form);
  const save = async (volumes) => {
    onChange(await call('PATCH', `/deployments/${id}`, { volumes }));
    configChanged();
  };
  function show(dep) {
    const volumes = dep.volumes || [];
    rows.replaceChildren(...volumes.map((v) => h('tr', {},
      h('td', { 'data-label': 'Name' }, h('code', { text: v.name })),
      h('td', { 'data-label': 'Mounted at' }, h('code', { text: v.mount_path })),
      h('td', {}, h('button', { type: 'button', text: 'Remove', 'aria-label': `Remove volume ${v.name}`, onclick: () => p.run(async () => {
        if (!(await confirmAction({ title: `Unmount ${v.name}?`, body: `From the next deploy or restart, ${v.mount_path} is no longer this volume.`, confirm: 'Remove' }))) return;
        await save((getDep().volumes || []).filter((x) => x.name !== v.name));
      }) })))));
    if (volumes.length === 0) rows.replaceChildren(h('tr', {}, h('td', { colspan: '3', class: 'empty', text: 'No volumes: the app’s files are lost at each deploy.' })));
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    p.run(async () => {
      await save([...(getDep().volumes || []), { name: name.value, mount_path: mount.value }]);
      form.reset();
    });
  });
  return { node: p.node, show };
}

function webhookPanel(id, getDep, onChange, ctx) {
  const auto = h('input', { type: 'checkbox', name: 'auto_deploy', id: 'auto-deploy' });
  const state = h('p', { id: 'webhook-state', class: 'muted' });
  const shown = h('div', { id: 'webhook-new', hidden: true });
  const rows = h('tbody', { id: 'delivery-rows' });
  const rotate = h('button', { type: 'button', text: 'Create webhook' });
  let configured = false;
  const p = panel('webhook', 'Deploy on push',
    h('label', { class: 'inline' }, auto, 'Deploy automatically when the tracked branch is pushed'),
    h('p', { class: 'hint', text: 'Give the payload URL and secret to GitHub, Gitea/Forgejo or GitLab (content type JSON; push events, and pull request events for previews). The secret is shown once; rotating replaces it.' }),
    state, h('div', { class: 'row' }, rotate), shown,
    h('h3', { text: 'Recent deliveries' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Received', 'Push', 'Result'].map((t) => h('th', { scope: 'col', text: t })))), rows));
  auto.addEventListener('change', () => p.run(async () => {
    try {
      onChange(await call('PATCH', `/deployments/${id}`, { auto_deploy: auto.checked }));
    } catch (err) {
      auto.checked = !auto.checked;
      throw err;
    }
  }));
  function showState(hook) {
    configured = hook.configured;
    state.replaceChildren('Payload URL: ', h('code', { id: 'webhook-url', text: hook.url }), h('br'), hook.configured ? `Secret set ${when(hook.created_at)}.` : 'No secret yet: create the webhook to get one.');
    rotate.textContent = hook.configured ? 'Rotate secret' : 'Create webhook';
  }
  rotate.addEventListener('click', () => p.run(async () => {
    if (configured && !(await confirmAction({ title: 'Rotate the webhook secret?', body: 'Deliveries signed with the old secret are refused from now on, until you give the git host the new one.', confirm: 'Rotate' }))) return;
    const hook = await call('POST', `/deployments/${id}/webhook`);
    shown.replaceChildren(h('p', {}, h('strong', { text: 'Secret (shown once): ' }), h('code', { class: 'secret-value', id: 'webhook-secret', text: hook.secret })));
    shown.hidden = false;
    showState(await call('GET', `/deployments/${id}/webhook`));
  }));
  async function load(signal) {
    const [hook, items] = await Promise.all([
      call('GET', `/deployments/${id}/webhook`, undefined, { signal }),
      call('GET', `/deployments/${id}/webhook/deliveries`, undefined, { signal }),
    ]);
    showState(hook);
    replaceKeepingFocus(rows, items.slice(0, 20).map((d) => h('tr', {},
      h('td', { 'data-label': 'Received' }, h('time', { datetime: d.received_at, title: new Date(d.received_at).toLocaleString(), text: when(d.received_at) })),
      h('td', { 'data-label': 'Push' }, [d.provider, d.event].filter(Boolean).join(' '), d.ref ? h('div', { class: 'mono', text: `${d.ref}${d.commit_sha ? ` @ ${d.commit_sha.slice(0, 12)}` : ''}` }) : ''),
      h('td', { 'data-label': 'Result' }, badge(d.outcome === 'deployed' ? 'succeeded' : d.outcome === 'rejected' ? 'failed' : 'stopped', d.outcome), ' ', d.reason, d.build_id ? h('code', { text: ` (build ${d.build_id.slice(0, 8)})` }) : ''))));
    if (items.length === 0) rows.replaceChildren(h('tr', {}, h('td', { colspan: '3', class: 'empty', text: 'No deliveries yet.' })));
  }
  ctx.poll(5000, (signal) => p.run(() => load(signal)));
  return { node: p.node, show: (dep) => { auto.checked = Boolean(dep.auto_deploy); } };
}

function sourcePanel(id, ctx) {
  const picker = sourcePicker();
  const status = h('p', { class: 'note', role: 'status', 'aria-live': 'polite' });
  const bar = h('progress', { hidden: true, 'aria-label': 'Upload progress' });
  const button = h('button', { type: 'button', class: 'primary', text: 'Upload and deploy' });
  const p = panel('source', 'Source', picker.node, h('div', { class: 'row' }, button), bar, status);
  button.addEventListener('click', () => p.run(async () => {
    button.disabled = true;
    try {
      await uploadChosen(picker.chosen(), id, status, bar, ctx.signal);
      const build = await call('POST', `/deployments/${id}/deploy`);
      status.textContent = `Uploaded; build ${build.id.slice(0, 8)} started.`;
    } finally {
      button.disabled = false;
    }
  }));
  return p.node;
}

/** The Settings tab: environment, source upload (uploaded apps), volumes, deploy on push (git apps). */
export function renderSettingsTab(container, page) {
  const { ctx } = page;
  let dep = page.dep();
  const onChange = (next) => { dep = next; volumes.show(dep); webhook?.show(dep); };
  const volumes = volumesPanel(dep.id, () => dep, onChange, page.configChanged);
  const webhook = dep.source_type === 'git' ? webhookPanel(dep.id, () => dep, onChange, ctx) : null;
  container.append(
    envPanel(dep.id, { ...ctx, configChanged: page.configChanged }),
    volumes.node,
    ...(webhook ? [webhook.node] : []),
  );
  onChange(dep);
  return {
    update(next) {
      if (JSON.stringify(next.volumes) !== JSON.stringify(dep.volumes) || next.auto_deploy !== dep.auto_deploy) onChange(next);
      else dep = next;
    },
  };
}

/** The Domains tab: custom domains with their TLS status. */
export function renderDomainsTab(container, page) {
  container.append(domainsPanel(page.id, page.ctx));
}

/** An uploaded app's source panel (Builds tab): upload a folder or .tar.gz and deploy it. */
export function renderSourcePanel(container, page) {
  container.append(sourcePanel(page.id, page.ctx));
}
