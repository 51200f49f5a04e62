// The pending-changes bar: configuration saved reaches a running app only when it is re-released; the server records what changed (config_pending), so every tab, phone and the CLI say the same, and the bar offers the restart.
import { h } from './dom.js';

/** "LOG_LEVEL, volumes": what changed, as the server recorded it. */
export function pendingKeys(dep) {
  return (dep.config_pending_keys || []).join(', ');
}

/**
 * A bar for deployment `id`, shown while the deployment's `config_pending` is set. `mark()` after a
 * saved change (reads the deployment again), `sync(dep)` on every refresh; the button calls
 * `restart()` (the page's own restart, which confirms nothing: the bar is the question).
 */
export function pendingChanges(id, restart, report, reload = async () => {}) {
  const text = h('span', { id: 'pending-text' });
  const button = h('button', { type: 'button', class: 'primary', id: 'pending-restart', text: 'Restart to apply' });
  const bar = h('div', { class: 'pending-bar', id: 'pending-bar', role: 'status', hidden: true }, text, button);
  let dep = null;
  function show() {
    if (dep === null || !dep.config_pending) { bar.hidden = true; return; }
    const running = dep.status === 'running';
    const what = pendingKeys(dep) ? `Configuration changed (${pendingKeys(dep)})` : 'Configuration changed';
    text.textContent = running
      ? `${what}: the running app still has the old one until it restarts.`
      : `${what}: it applies at the next ${dep.live_build_id ? 'restart or ' : ''}deploy.`;
    button.hidden = !running;
    bar.hidden = false;
  }
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      await restart();
    } catch (err) {
      report(err);
    } finally {
      button.disabled = false;
    }
  });
  return {
    node: bar,
    mark() { reload().catch(report); },
    /** Deploy, restart or rollback from this page: the server clears the record once the release is live. */
    released() {},
    sync(next) { dep = next; show(); },
  };
}
