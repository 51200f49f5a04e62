// An app's Services tab (contract §21): the services of a compose app's live set, which one is web, their containers and health, each with a link to its own logs.
import { call } from './api.js';
import { badge, h, replaceKeepingFocus } from './dom.js';

/** Fills `panel`; `page` is the app page's `{id, ctx, showTab, filterLogs}`. Reloaded on each refresh while the tab is shown. */
export function renderServicesTab(panel, page) {
  const { id, ctx } = page;
  const rows = h('tbody', { id: 'service-rows' });
  const note = h('p', { class: 'muted', id: 'services-note' });
  panel.append(h('section', { class: 'card', 'aria-labelledby': 'services-title' },
    h('h2', { id: 'services-title', text: 'Services' }),
    h('p', { class: 'hint', text: 'Released as one set from the compose file: the web service is served at the app\'s address; the others are reachable by their name from this app\'s services only.' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Service', 'Role', 'State', 'Health', 'Containers', 'Image', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    note));

  let loading = false;
  async function load() {
    if (loading || panel.hidden) return;
    loading = true;
    try {
      const services = await call('GET', `/deployments/${id}/services`, undefined, { signal: ctx.signal });
      note.textContent = services.length === 0 ? 'No release of the compose file runs yet.' : '';
      replaceKeepingFocus(rows, services.map((s) => h('tr', { dataset: { service: s.name } },
        h('td', { 'data-label': 'Service' }, h('code', { text: s.name })),
        h('td', { 'data-label': 'Role', text: s.web ? 'web (served)' : 'internal' }),
        h('td', { 'data-label': 'State' }, badge(s.state === 'running' ? 'running' : s.state === 'stopped' ? 'stopped' : 'failed', s.state)),
        h('td', { 'data-label': 'Health', text: s.health ?? 'no health check' }),
        h('td', { 'data-label': 'Containers', text: `${s.running} of ${s.replicas} running` }),
        h('td', { 'data-label': 'Image' }, h('code', { text: s.image })),
        h('td', {}, h('button', { type: 'button', text: 'Logs', 'aria-label': `Logs of ${s.name}`, dataset: { key: `logs-${s.name}` }, onclick: () => page.filterLogs?.(s.name) })))));
    } catch (err) {
      if (err.name !== 'AbortError') note.textContent = err.message;
    } finally {
      loading = false;
    }
  }
  return { update() { load(); } };
}
