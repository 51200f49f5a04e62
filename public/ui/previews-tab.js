// An app's Previews (decisions §17): the previews switch, one row per pull request with its link and status, its newest build's log, delete.
import { call, streamText } from './api.js';
import { badge, confirmAction, h, replaceKeepingFocus, when } from './dom.js';

/**
 * Fills `panel` for a git app; `page` is `{id, ctx, dep()}` (the app page's). Returns
 * `{update(dep)}`, called with the deployment on every refresh. The list is polled while the page is open.
 */
export function renderPreviewsTab(panel, page) {
  const { id, ctx } = page;
  const toggle = h('input', { type: 'checkbox', name: 'previews', id: 'previews-toggle' });
  const rows = h('tbody', { id: 'preview-rows' });
  const error = h('p', { class: 'panel-error', role: 'alert' });
  const logTitle = h('h3', { id: 'preview-log-title', text: 'Preview build log', hidden: true });
  const log = h('pre', { class: 'log', id: 'preview-log', tabindex: '0', 'aria-label': 'Preview build log', hidden: true });
  panel.append(h('section', { class: 'card', id: 'previews', 'aria-labelledby': 'previews-title' },
    h('h2', { id: 'previews-title', text: 'Previews' }),
    h('label', { class: 'inline' }, toggle, 'Build a preview of each pull request against the tracked branch'),
    h('p', { class: 'hint', text: 'Each preview is served at <subdomain>-pr-<number> and removed when its pull request closes or merges (at most 10). The webhook must send pull request events; a preview from a fork gets no secrets.' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Pull request', 'Status', 'Head', 'Updated', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    logTitle, log, error));

  const run = async (fn) => {
    error.textContent = '';
    try { await fn(); } catch (err) { if (err.name !== 'AbortError') error.textContent = err.message; }
  };
  toggle.addEventListener('change', () => run(async () => {
    try {
      await call('PATCH', `/deployments/${id}`, { previews: toggle.checked });
    } catch (err) {
      toggle.checked = !toggle.checked;
      throw err;
    }
  }));

  let logController = null;
  let shownLog = null;
  async function showLog(preview) {
    logController?.abort();
    logController = new AbortController();
    const [build] = await call('GET', `/deployments/${id}/previews/${preview.number}/builds?limit=1`, undefined, { signal: logController.signal });
    shownLog = preview.number;
    logTitle.hidden = false;
    log.hidden = false;
    logTitle.textContent = `Build log of preview #${preview.number}`;
    log.textContent = '';
    if (build === undefined) { log.textContent = 'No build yet.'; return; }
    const follow = build.status === 'building' ? '?follow=true' : '';
    await streamText(`/deployments/${id}/previews/${preview.number}/builds/${build.id}/logs${follow}`, (text) => log.append(text), logController.signal);
  }
  ctx.signal.addEventListener('abort', () => logController?.abort(), { once: true });

  function row(p) {
    const remove = h('button', { type: 'button', class: 'danger', text: 'Delete', 'aria-label': `Delete preview #${p.number}` });
    remove.addEventListener('click', () => run(async () => {
      if (!(await confirmAction({ title: `Delete preview #${p.number}?`, body: 'Its containers, image, route and logs are removed now; the next event of the pull request builds it again.', confirm: 'Delete' }))) return;
      await call('DELETE', `/deployments/${id}/previews/${p.number}`);
      if (shownLog === p.number) { logController?.abort(); log.hidden = true; logTitle.hidden = true; shownLog = null; }
      await load(ctx.signal);
    }));
    const logButton = h('button', { type: 'button', text: 'Build log', 'aria-label': `Build log of preview #${p.number}` });
    logButton.addEventListener('click', () => run(() => showLog(p)));
    return h('tr', { dataset: { key: String(p.number) } },
      h('td', { 'data-label': 'Pull request' }, h('strong', { text: `#${p.number}` }), ' ', h('a', { href: p.url, rel: 'noopener noreferrer', target: '_blank', text: p.url })),
      h('td', { 'data-label': 'Status' }, badge(p.status)),
      h('td', { 'data-label': 'Head' }, p.branch ? h('span', { text: `${p.branch} ` }) : '', h('code', { text: (p.commit_sha || '').slice(0, 12) })),
      h('td', { 'data-label': 'Updated' }, h('time', { datetime: p.updated_at, title: new Date(p.updated_at).toLocaleString(), text: when(p.updated_at) })),
      h('td', { class: 'actions' }, logButton, remove));
  }

  async function load(signal) {
    const items = await call('GET', `/deployments/${id}/previews`, undefined, { signal });
    replaceKeepingFocus(rows, ...items.map(row));
    if (items.length === 0) rows.replaceChildren(h('tr', {}, h('td', { colspan: '5', class: 'empty', text: toggle.checked ? 'No previews: open a pull request to get one.' : 'No previews: previews are off.' })));
  }
  ctx.poll(4000, (signal) => run(() => load(signal)));

  const update = (dep) => { if (document.activeElement !== toggle) toggle.checked = Boolean(dep.previews); };
  const dep = page.dep();
  if (dep) update(dep);
  return { update };
}
