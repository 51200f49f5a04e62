// An app's Logs tab: the live container's output, followed (last 200 lines, then new output), with pause.
import { call, streamText } from './api.js';
import { h } from './dom.js';
import { terminal } from './terminal.js';

/** Fills `panel`; `update(dep)` follows the container that runs now. */
export function renderLogsTab(panel, page) {
  const { id, ctx } = page;
  const runtimeLog = h('pre', { class: 'log tall', id: 'runtime-log', tabindex: '0', 'aria-label': 'Runtime log' });
  const runtimeNote = h('p', { class: 'muted', id: 'runtime-note' });
  const followButton = h('button', { type: 'button', text: 'Pause' });
  // A compose app's logs: every service's lines ([service] prefixed), or one service's (`?service=`).
  const serviceSelect = h('select', { id: 'logs-service', 'aria-label': 'Service' }, h('option', { value: '', text: 'All services' }));
  const serviceLabel = h('label', { hidden: true }, 'Service ', serviceSelect);
  panel.append(h('section', { class: 'card', 'aria-labelledby': 'runtime-title' },
    h('div', { class: 'spread' }, h('h2', { id: 'runtime-title', text: 'Runtime logs' }), h('div', {}, serviceLabel, ' ', followButton)), runtimeNote, runtimeLog));

  let dep = null;
  let runtimeKey = null;
  let runtimeController = null;
  let paused = false;
  const runtimeTerm = terminal(runtimeLog);
  followButton.addEventListener('click', () => {
    paused = !paused;
    followButton.textContent = paused ? 'Follow' : 'Pause';
    runtimeKey = null;
    if (paused) { runtimeController?.abort(); runtimeNote.textContent = 'Paused.'; } else sync();
  });
  let services = null;
  const only = () => (serviceSelect.value ? `&service=${encodeURIComponent(serviceSelect.value)}` : '');
  serviceSelect.addEventListener('change', () => { runtimeKey = null; runtimeTerm.clear(); sync(); });
  /** The Services tab's "Logs" of one service. */
  page.filterLogs = (service) => {
    if (![...serviceSelect.options].some((o) => o.value === service)) serviceSelect.append(h('option', { value: service, text: service }));
    serviceSelect.value = service;
    serviceSelect.dispatchEvent(new Event('change'));
    page.showTab('logs');
  };
  function loadServices() {
    if (!dep?.compose_path || services !== null) return;
    serviceLabel.hidden = false;
    services = call('GET', `/deployments/${id}/services`, undefined, { signal: ctx.signal }).then((list) => {
      for (const s of list) if (![...serviceSelect.options].some((o) => o.value === s.name)) serviceSelect.append(h('option', { value: s.name, text: s.name }));
    }, () => { services = null; });
  }
  function sync() {
    loadServices();
    const key = dep && dep.status === 'running' && dep.live_build_id ? `${dep.live_build_id}${only()}` : null;
    if (paused || key === runtimeKey) return;
    runtimeKey = key;
    runtimeController?.abort();
    if (key === null) {
      runtimeNote.textContent = dep && dep.live_build_id ? `Not running (${dep.status}); the last output is below.` : 'No container has run yet.';
      if (dep && dep.live_build_id && runtimeLog.textContent === '') {
        call('GET', `/deployments/${id}/logs?tail=200${only()}`, undefined, { signal: ctx.signal }).then((text) => runtimeTerm.append(text), () => {});
      }
      return;
    }
    runtimeController = new AbortController();
    runtimeTerm.clear();
    runtimeNote.textContent = `Following the live ${serviceSelect.value ? `service ${serviceSelect.value}` : 'container'} (last 200 lines, then new output).`;
    streamText(`/deployments/${id}/logs?tail=200&follow=true${only()}`, (text) => runtimeTerm.append(text), AbortSignal.any([ctx.signal, runtimeController.signal]))
      .catch((err) => { if (err.name !== 'AbortError') runtimeNote.textContent = err.message; })
      .finally(() => { if (runtimeKey === key) runtimeKey = null; });
  }
  return { update(next) { dep = next; sync(); } };
}
