// What an app's status leaves out, shown beside it in the list, the app page and its Overview: a crash loop (health) and configuration not applied yet (config_pending).
import { badge, h } from './dom.js';

/** "Crashed — restarting (exit 3: boom)": the same words as the CLI's (src/domain/app-health.ts); empty when healthy. */
export function healthSummary(health) {
  if (!health || health.state === 'ok') return '';
  const detail = [health.last_exit_code == null ? '' : `exit ${health.last_exit_code}`, health.last_line || ''].filter(Boolean).join(': ');
  const head = health.state === 'crash_loop' ? 'Crashed — restarting' : 'Restarted after a crash';
  return detail ? `${head} (${detail})` : head;
}

/** The status pill, then what it leaves out: the crash (a red pill and the sentence) and pending configuration (a pill naming it). */
export function statusBadges(dep) {
  const summary = healthSummary(dep.health);
  return [
    badge(dep.status),
    summary ? [' ', badge('failed', dep.health.state === 'crash_loop' ? 'crash loop' : 'crashed'), h('div', { class: 'health-line', text: summary })] : '',
    dep.config_pending ? [' ', h('span', { class: 'badge config-pending', title: `Changed since the running release: ${(dep.config_pending_keys || []).join(', ')}`, text: 'restart pending' })] : '',
  ];
}
