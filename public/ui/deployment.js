// One app's page: a header with status, actions (as the state table allows) and pending changes, over tabs (Overview, Services, Builds, Logs, Metrics, Settings, Domains, Previews).
import { call } from './api.js';
import { badge, confirmAction, h } from './dom.js';
import { pendingChanges } from './pending-changes.js';
import { statusBadges } from './app-state.js';
import { tabbed } from './tabs.js';
import { renderBuildsTab } from './builds-tab.js';
import { renderLogsTab } from './logs-tab.js';
import { renderMetricsTab } from './metrics-tab.js';
import { renderOverviewTab } from './overview-tab.js';
import { renderDomainsTab, renderSettingsTab, renderSourcePanel } from './settings.js';
import { renderPreviewsTab } from './previews-tab.js';
import { renderJobsTab } from './jobs-tab.js';
import { renderServicesTab } from './services-tab.js';

/**
 * The tabs of an app's page, in order. A tab is `{id, label, render(panel, page), shown?(dep)}`:
 * `render` fills its panel once and may return `{update(dep, builds, allowed)}`, called on every
 * refresh. Adding a tab is one entry here and one module.
 */
export const APP_TABS = [
  { id: 'overview', label: 'Overview', render: renderOverviewTab },
  // A compose app's set (contract §21).
  { id: 'services', label: 'Services', render: renderServicesTab, shown: (dep) => Boolean(dep.compose_path) },
  { id: 'builds', label: 'Builds', render: (panel, page) => {
    if (page.dep().source_type === 'archive') renderSourcePanel(panel, page);
    return renderBuildsTab(panel, page);
  } },
  { id: 'logs', label: 'Logs', render: renderLogsTab },
  { id: 'metrics', label: 'Metrics', render: renderMetricsTab },
  { id: 'settings', label: 'Settings', render: renderSettingsTab },
  // Scheduled jobs (decisions §22).
  { id: 'jobs', label: 'Jobs', render: renderJobsTab },
  { id: 'domains', label: 'Domains', render: renderDomainsTab },
  // Pull request previews (decisions §17): git apps only.
  { id: 'previews', label: 'Previews', render: renderPreviewsTab, shown: (dep) => dep.source_type === 'git' },
];

/**
 * Which actions the state table (decisions §4) lets a deployment take now. Where the table allows an
 * action only as a no-op (stop when stopped) or only when a release exists, the button says so by
 * being disabled.
 */
export function allowedActions(dep) {
  const live = dep.live_build_id != null;
  const s = dep.status;
  return {
    // An uploaded app with nothing uploaded has nothing to build (the API answers 409).
    deploy: dep.source_type !== 'archive' || dep.uploaded !== false,
    cancel: s === 'building',
    stop: s === 'building' || s === 'running' || (s === 'failed' && live),
    restart: s === 'running' || ((s === 'stopped' || s === 'failed') && live),
    rollback: s !== 'pending',
    remove: true,
  };
}

export function renderDeployment(view, id, tab, ctx) {
  let dep = null;
  const title = h('h1', { id: 'detail-title', text: 'Loading…' });
  const status = h('span', { id: 'status' });
  const link = h('a', { id: 'app-url', rel: 'noopener noreferrer', target: '_blank' });
  const buttons = {
    deploy: h('button', { type: 'button', class: 'primary', text: 'Deploy' }),
    cancel: h('button', { type: 'button', text: 'Cancel build' }),
    stop: h('button', { type: 'button', text: 'Stop' }),
    restart: h('button', { type: 'button', text: 'Restart' }),
    remove: h('button', { type: 'button', class: 'danger', text: 'Delete' }),
  };
  const note = h('p', { class: 'note', id: 'action-note', role: 'status', 'aria-live': 'polite' });
  const pending = pendingChanges(id, async () => {
    ctx.report(null);
    note.textContent = (await call('POST', `/deployments/${id}/restart`)).message;
    await refresh(ctx.signal);
  }, ctx.report, () => refresh(ctx.signal));
  const head = h('section', { class: 'card' },
    h('p', { class: 'muted' }, h('a', { href: '#/', text: '← Apps' })),
    h('div', { class: 'spread' }, title, status),
    h('p', {}, link),
    h('div', { class: 'actions', id: 'actions' }, Object.values(buttons)), pending.node, note);
  view.append(head);

  // ---- actions -------------------------------------------------------------------------------
  const act = (fn) => (...args) => ctx.run(async () => {
    note.textContent = '';
    await fn(...args);
    await refresh(ctx.signal);
  });
  buttons.deploy.addEventListener('click', act(async () => {
    const build = await call('POST', `/deployments/${id}/deploy`);
    note.textContent = `Build ${build.id.slice(0, 8)} started.`;
    pending.released();
    parts.get('builds')?.followLatest?.();
  }));
  buttons.cancel.addEventListener('click', act(async () => {
    if (!(await confirmAction({ title: 'Cancel the build?', body: `The build in flight is stopped; ${dep.live_build_id ? 'the live release keeps serving' : 'nothing is serving yet'}.`, confirm: 'Cancel build' }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/cancel`)).message;
  }));
  buttons.stop.addEventListener('click', act(async () => {
    if (!(await confirmAction({ title: `Stop ${dep.name}?`, body: `${dep.url || dep.subdomain} will answer 503 until you restart or deploy it.${dep.status === 'building' ? ' The build in flight is cancelled.' : ''}`, confirm: 'Stop' }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/stop`)).message;
  }));
  buttons.restart.addEventListener('click', act(async () => {
    if (!(await confirmAction({ title: `Restart ${dep.name}?`, body: 'A new container of the live build starts with the current configuration; traffic moves to it once it is healthy.', confirm: 'Restart', danger: false }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/restart`)).message;
    pending.released();
  }));
  buttons.remove.addEventListener('click', () => ctx.run(async () => {
    if (!(await confirmAction({ title: `Delete ${dep.name}?`, body: `Its containers, images, uploaded sources, logs and volumes are removed, and ${dep.subdomain} becomes free. This cannot be undone.`, confirm: 'Delete' }))) return;
    await call('DELETE', `/deployments/${id}`);
    location.hash = '#/';
  }));
  // Decisions §9: a rollback restores the build's image and the configuration it was last released with.
  const rollback = act(async (build) => {
    if (!(await confirmAction({ title: `Roll back to build ${build.id.slice(0, 8)}?`, body: `Its image is started again with the configuration it was last released with, which becomes the current configuration again (changes made since are dropped); traffic moves to it once it is healthy.${dep.status === 'building' ? ' The build in flight is cancelled.' : ''}`, confirm: 'Roll back', danger: false }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/rollback`, { build_id: build.id })).message;
    pending.released();
  });

  // ---- tabs, built once the deployment is known ------------------------------------------------
  const page = {
    id,
    ctx,
    dep: () => dep,
    rollback: (build) => rollback(build),
    configChanged: () => pending.mark(),
    showTab: (tabId) => tabs?.select(tabId, true),
  };
  let tabs = null;
  const parts = new Map();
  function buildTabs() {
    const shown = APP_TABS.filter((t) => !t.shown || t.shown(dep));
    tabs = tabbed(shown, tab || 'overview', (tabId) => `#/d/${id}/${tabId}`);
    view.append(tabs.node);
    for (const t of shown) parts.set(t.id, t.render(tabs.panel(t.id), page) || {});
  }

  // ---- the page, kept current by polling -------------------------------------------------------
  async function refresh(signal) {
    const [d, builds] = await Promise.all([
      call('GET', `/deployments/${id}`, undefined, { signal }),
      call('GET', `/deployments/${id}/builds?limit=20`, undefined, { signal }),
    ]);
    dep = d;
    title.textContent = dep.name;
    document.title = `${dep.name} · Slipway`;
    status.replaceChildren(...statusBadges(dep).flat(2));
    link.href = dep.url || '#';
    link.textContent = dep.url || '';
    const allowed = allowedActions(dep);
    for (const [name, button] of Object.entries(buttons)) button.disabled = !allowed[name];
    buttons.deploy.textContent = dep.source_type === 'git' ? 'Deploy latest commit' : 'Deploy upload';
    buttons.deploy.title = allowed.deploy ? '' : 'Nothing uploaded yet: upload a folder or .tar.gz on the Builds tab first.';
    pending.sync(dep);
    if (!tabs) buildTabs();
    for (const part of parts.values()) part.update?.(dep, builds, allowed);
  }

  ctx.poll(2000, refresh);
}
