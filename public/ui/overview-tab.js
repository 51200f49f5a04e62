// An app's Overview tab: where it runs, what it runs, and the latest build at a glance.
import { badge, duration, h, when } from './dom.js';
import { statusBadges } from './app-state.js';
import { pendingKeys } from './pending-changes.js';

const SOURCE = (dep) => (dep.source_type === 'git' ? `git ${dep.repo_url}${dep.branch ? ` (${dep.branch})` : ' (default branch)'}` : 'uploaded source');

/** Fills `panel` with a summary that links to the tabs holding the detail. */
export function renderOverviewTab(panel, page) {
  const facts = h('dl', { class: 'facts', id: 'overview-facts' });
  const latest = h('div', { id: 'overview-latest' });
  const go = (tabId, text) => h('button', { type: 'button', class: 'link', text, onclick: () => page.showTab(tabId) });
  panel.append(h('section', { class: 'card', 'aria-labelledby': 'overview-title' },
    h('h2', { id: 'overview-title', text: 'Overview' }), facts,
    h('h3', { text: 'Latest build' }), latest,
    h('p', { class: 'muted' }, go('logs', 'Runtime logs'), ' · ', go('metrics', 'Metrics'), ' · ', go('settings', 'Environment and volumes'), ' · ', go('domains', 'Custom domains'))));
  let last = '';
  return {
    update(dep, builds) {
      const sig = JSON.stringify([dep, builds[0], Math.floor(Date.now() / 60000)]);
      if (sig === last) return;
      last = sig;
      const fact = (term, value) => [h('dt', { text: term }), h('dd', {}, value)];
      facts.replaceChildren(...[
        fact('Status', statusBadges(dep)),
        ...(dep.config_pending ? [fact('Configuration', h('span', { id: 'overview-pending', text: `${pendingKeys(dep) || 'The configuration'} changed since the running release: ${dep.status === 'running' ? 'it applies when the app restarts' : 'it applies at the next deploy or restart'}.` }))] : []),
        ...failureFacts(dep, builds, go),
        fact('URL', dep.url ? h('a', { href: dep.url, text: dep.url, rel: 'noopener noreferrer', target: '_blank' }) : '—'),
        fact('Source', SOURCE(dep)),
        fact('Live build', dep.live_build_id ? h('code', { text: dep.live_build_id.slice(0, 8) }) : 'none yet'),
        fact('Updated', h('time', { datetime: dep.updated_at, title: new Date(dep.updated_at).toLocaleString(), text: when(dep.updated_at) })),
      ].flat());
      const b = builds[0];
      latest.replaceChildren(b
        ? h('p', {}, h('code', { text: b.id.slice(0, 8) }), ' ', badge(b.status), ` started ${when(b.started_at)}${b.finished_at ? `, took ${duration(b.started_at, b.finished_at)}` : ''} · `, go('builds', 'Builds and logs'))
        : h('p', { class: 'empty' }, dep.source_type === 'archive' ? 'No builds yet: upload a source on the Builds tab, then deploy.' : 'No builds yet: deploy to build the repository.'));
    },
  };
}

/** A failed app's reason: the failed build's last error line, with a link to its log (Builds tab). */
function failureFacts(dep, builds, go) {
  const failed = builds[0] && builds[0].status === 'failed' ? builds[0] : null;
  if (dep.status !== 'failed' || !failed) return [];
  const reason = (failed.error || 'the build failed').trim().split('\n').filter(Boolean).pop() || 'the build failed';
  return [h('dt', { text: 'Why it failed' }), h('dd', { id: 'overview-failure' },
    h('span', { class: 'failure-line', text: reason.slice(0, 300) }), ' ',
    go('builds', `Build log of ${failed.id.slice(0, 8)}`),
    dep.live_build_id ? h('div', { class: 'muted', text: 'The previous release keeps serving.' }) : '')];
}
