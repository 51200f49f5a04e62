// The pending-changes bar: configuration saved in the dashboard reaches a running app only when it is re-released, so say so and offer the restart.
import { h } from './dom.js';

const KEY = (id) => `slipway-pending-${id}`;

/**
 * A bar for deployment `id`. `mark()` after a saved change, `sync(dep)` on every refresh; the
 * button calls `restart()` (the page's own restart, which confirms nothing: the bar is the question).
 * The mark survives a reload of the tab (sessionStorage) and is dropped once the app re-releases.
 */
export function pendingChanges(id, restart, report) {
  const text = h('span', { id: 'pending-text' });
  const button = h('button', { type: 'button', class: 'primary', id: 'pending-restart', text: 'Restart to apply' });
  const bar = h('div', { class: 'pending', id: 'pending-bar', role: 'status', hidden: true }, text, button);
  let dep = null;
  const marked = () => sessionStorage.getItem(KEY(id)) !== null;
  const clear = () => sessionStorage.removeItem(KEY(id));
  function show() {
    if (!marked() || dep === null) { bar.hidden = true; return; }
    const running = dep.status === 'running';
    text.textContent = running
      ? 'Configuration changed: the running app still has the old one until it restarts.'
      : `Configuration changed: it applies at the next ${dep.live_build_id ? 'restart or ' : ''}deploy.`;
    button.hidden = !running;
    bar.hidden = false;
  }
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      await restart();
      clear();
      show();
    } catch (err) {
      report(err);
    } finally {
      button.disabled = false;
    }
  });
  return {
    node: bar,
    mark() { sessionStorage.setItem(KEY(id), String(Date.now())); show(); },
    /** Deploy, restart or rollback from this page re-released the app with the current configuration. */
    released() { clear(); show(); },
    sync(next) {
      // A release started elsewhere (the CLI, a push) also applies the configuration.
      if (dep && next.status === 'building' && dep.status !== 'building') clear();
      dep = next;
      show();
    },
  };
}
