// An app's Metrics tab: live CPU, memory and network of the running container.
import { ApiError, call } from './api.js';
import { bytes, h } from './dom.js';
import { sparkline } from './charts.js';

/** Fills `panel`; samples while the page is open. */
export function renderMetricsTab(panel, page) {
  const { id, ctx } = page;
  let dep = null;
  const metricsBox = h('div', { class: 'charts', id: 'metrics' });
  const metricsNote = h('p', { class: 'muted', id: 'metrics-note' });
  panel.append(h('section', { class: 'card', 'aria-labelledby': 'metrics-title' }, h('h2', { id: 'metrics-title', text: 'Live metrics' }), metricsNote, metricsBox));
  const samples = { cpu: [], mem: [], rx: [], tx: [] };
  const cpuChart = sparkline('CPU use over the last minutes', 100);
  let memChart = null;
  const netChart = sparkline('Network received and sent per second');
  const cpuValue = h('div', { class: 'value', id: 'metric-cpu' });
  const memValue = h('div', { class: 'value', id: 'metric-memory' });
  const memBar = h('progress', { 'aria-label': 'Memory used of the limit' });
  const netValue = h('div', { class: 'value', id: 'metric-network' });
  const restarts = h('p', { class: 'muted', id: 'metric-restarts' });
  let lastNet = null;
  const memSlot = h('div');
  metricsBox.append(
    h('div', { class: 'chart' }, h('div', { class: 'muted', text: 'CPU' }), cpuValue, cpuChart.svg),
    h('div', { class: 'chart' }, h('div', { class: 'muted', text: 'Memory' }), memValue, memBar, memSlot),
    h('div', { class: 'chart' }, h('div', { class: 'muted' }, 'Network ', h('span', { class: 'legend-rx', text: 'in' }), ' / ', h('span', { class: 'legend-tx', text: 'out' })), netValue, netChart.svg),
  );
  metricsBox.after(restarts);
  metricsBox.hidden = true;
  async function sampleMetrics(signal) {
    if (!dep || dep.status !== 'running') {
      metricsBox.hidden = true;
      metricsNote.textContent = 'Metrics appear while the app runs.';
      restarts.textContent = '';
      return;
    }
    let m;
    try {
      m = await call('GET', `/deployments/${id}/metrics`, undefined, { signal });
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) { metricsBox.hidden = true; metricsNote.textContent = err.message; return; }
      throw err;
    }
    const now = Date.now();
    const push = (list, v) => { list.push(v); if (list.length > 40) list.shift(); };
    push(samples.cpu, m.cpu_percent);
    push(samples.mem, m.memory_bytes);
    if (lastNet) {
      const dt = Math.max(0.001, (now - lastNet.at) / 1000);
      push(samples.rx, Math.max(0, (m.network_rx_bytes - lastNet.rx) / dt));
      push(samples.tx, Math.max(0, (m.network_tx_bytes - lastNet.tx) / dt));
    }
    lastNet = { at: now, rx: m.network_rx_bytes, tx: m.network_tx_bytes };
    if (!memChart) { memChart = sparkline('Memory use against its limit', m.memory_limit_bytes); memSlot.append(memChart.svg); }
    cpuValue.textContent = `${m.cpu_percent.toFixed(1)} %`;
    memValue.textContent = `${bytes(m.memory_bytes)} of ${bytes(m.memory_limit_bytes)}`;
    memBar.max = m.memory_limit_bytes;
    memBar.value = m.memory_bytes;
    netValue.textContent = samples.rx.length ? `${bytes(Math.round(samples.rx.at(-1)))}/s in, ${bytes(Math.round(samples.tx.at(-1)))}/s out` : `${bytes(m.network_rx_bytes)} in, ${bytes(m.network_tx_bytes)} out`;
    cpuChart.update(samples.cpu);
    memChart.update(samples.mem);
    netChart.update(samples.rx, samples.tx);
    restarts.textContent = `Up since ${new Date(m.started_at).toLocaleString()}; ${m.restarts === 0 ? 'no crash restarts' : `restarted ${m.restarts} time${m.restarts === 1 ? '' : 's'} after crashes`}.`;
    metricsNote.textContent = '';
    metricsBox.hidden = false;
  }

  // Metrics take the engine about a second to sample; every 3 s keeps one in flight at most.
  setTimeout(() => ctx.poll(3000, sampleMetrics), 500);
  return { update(next) { dep = next; } };
}
