// An app's Metrics tab: the last hour of CPU, memory and network from the server's history, drawn with uPlot (an npm dependency served at /ui/vendor), with the live figures above and a table for keyboard and screen-reader users.
import uPlot from './vendor/uplot.esm.js';
import { ApiError, call } from './api.js';
import { bytes, h } from './dom.js';

const CHARTS = [
  {
    id: 'cpu', title: 'CPU', unit: '% of one CPU',
    series: [{ label: 'CPU %', stroke: '#0b57d0', fill: 'rgba(11,87,208,.08)', value: (p) => p.cpu_percent }],
    format: (v) => `${v.toFixed(v < 10 ? 1 : 0)} %`,
  },
  {
    id: 'memory', title: 'Memory', unit: 'bytes',
    series: [
      { label: 'Memory used', stroke: '#0b57d0', fill: 'rgba(11,87,208,.08)', value: (p) => p.memory_bytes },
      { label: 'Limit', stroke: '#8a4700', dash: [6, 4], value: (p) => p.memory_limit_bytes },
    ],
    format: (v) => bytes(Math.round(v)),
  },
  {
    id: 'network', title: 'Network', unit: 'bytes per second',
    series: [
      { label: 'In', stroke: '#0b57d0', value: (p) => p.network_rx_bytes_per_second },
      { label: 'Out', stroke: '#8a4700', value: (p) => p.network_tx_bytes_per_second },
    ],
    format: (v) => `${bytes(Math.round(v))}/s`,
  },
];

/** Steps between two time ticks, in seconds: whole minutes only (the history spans an hour). */
const TIME_STEPS = [10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600];
/** A tick's label in the viewer's clock: hours and minutes, with seconds only when ticks are less than a minute apart. */
const clockLabel = (seconds, step) => new Date(seconds * 1000).toLocaleTimeString([], step < 60 ? { hour: '2-digit', minute: '2-digit', second: '2-digit' } : { hour: '2-digit', minute: '2-digit' });

/** uPlot options for one chart: a time axis and a value axis in the chart's unit; the legend shows hovered values. */
function chartOptions(chart, width) {
  const fmt = (v) => (v == null ? '—' : chart.format(v));
  return {
    width,
    height: 180,
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max * 1.1, chart.id === 'cpu' ? 5 : 1)] } },
    axes: [
      // Round steps labelled "14:05" (or "14:05:30"), 100 px apart at least: labels never overlap, even on a phone.
      { stroke: '#4f5b69', grid: { stroke: '#e6eaee' }, space: 100, incrs: TIME_STEPS, values: (u, splits, axis, space, step) => splits.map((v) => clockLabel(v, step)) },
      { stroke: '#4f5b69', grid: { stroke: '#e6eaee' }, size: 80, values: (u, splits) => splits.map((v) => chart.format(v)), label: chart.unit, labelSize: 18 },
    ],
    series: [{ label: 'Time', value: (u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleTimeString()) }, ...chart.series.map((s) => ({ label: s.label, stroke: s.stroke, fill: s.fill, dash: s.dash, width: 1.5, value: (u, v) => fmt(v), spanGaps: false }))],
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
  };
}

/** Fills `panel`; keeps the charts current while the page is open. */
export function renderMetricsTab(panel, page) {
  const { id, ctx } = page;
  let dep = null;
  const metricsNote = h('p', { class: 'muted', id: 'metrics-note' });
  const cpuValue = h('div', { class: 'value', id: 'metric-cpu' });
  const memValue = h('div', { class: 'value', id: 'metric-memory' });
  const netValue = h('div', { class: 'value', id: 'metric-network' });
  const restarts = h('p', { class: 'muted', id: 'metric-restarts' });
  const now = h('div', { class: 'charts', id: 'metrics', hidden: true },
    h('div', { class: 'chart' }, h('div', { class: 'muted', text: 'CPU now' }), cpuValue),
    h('div', { class: 'chart' }, h('div', { class: 'muted', text: 'Memory now' }), memValue),
    h('div', { class: 'chart' }, h('div', { class: 'muted', text: 'Network now' }), netValue));
  const boxes = CHARTS.map((c) => h('figure', { class: 'plot', id: `chart-${c.id}` }, h('figcaption', {}, h('strong', { text: c.title }), ` (${c.unit}, last hour)`)));
  const tableBody = h('tbody', { id: 'metrics-table-rows' });
  const table = h('details', { class: 'metrics-table' }, h('summary', { text: 'The samples as a table' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Time', 'CPU', 'Memory', 'In', 'Out'].map((t) => h('th', { scope: 'col', text: t })))), tableBody));
  const historyNote = h('p', { class: 'muted', id: 'history-note' });
  panel.append(h('section', { class: 'card', 'aria-labelledby': 'metrics-title' },
    h('h2', { id: 'metrics-title', text: 'Metrics' }), metricsNote, now, restarts,
    historyNote, h('div', { class: 'plots' }, boxes), table));

  const plots = new Map();
  let lastPoints = [];
  function draw(points) {
    lastPoints = points;
    const xs = points.map((p) => Date.parse(p.at) / 1000);
    CHARTS.forEach((chart, i) => {
      const data = [xs, ...chart.series.map((s) => points.map((p) => s.value(p)))];
      const box = boxes[i];
      const width = Math.max(200, box.clientWidth || 600);
      let plot = plots.get(chart.id);
      if (!plot) {
        plot = new uPlot(chartOptions(chart, width), data, box);
        plots.set(chart.id, plot);
        // The chart from its figure, for the page's own checks (tests read where its time labels fall).
        box.uplot = plot;
        // uPlot caches where its chart is; the page above it moves (live figures appear, tabs switch).
        const current = plot;
        box.addEventListener('pointerenter', () => current.syncRect(), { passive: true });
      } else {
        plot.setData(data);
      }
    });
    tableBody.replaceChildren(...points.slice(-30).reverse().map((p) => h('tr', {},
      h('td', { 'data-label': 'Time', text: new Date(p.at).toLocaleTimeString() }),
      h('td', { 'data-label': 'CPU', text: CHARTS[0].format(p.cpu_percent) }),
      h('td', { 'data-label': 'Memory', text: `${bytes(p.memory_bytes)} of ${bytes(p.memory_limit_bytes)}` }),
      h('td', { 'data-label': 'In', text: p.network_rx_bytes_per_second == null ? '—' : CHARTS[2].format(p.network_rx_bytes_per_second) }),
      h('td', { 'data-label': 'Out', text: p.network_tx_bytes_per_second == null ? '—' : CHARTS[2].format(p.network_tx_bytes_per_second) }))));
  }
  // Charts follow the panel's width (a window resized, a phone turned, the tab shown).
  const resize = new ResizeObserver(() => {
    CHARTS.forEach((chart, i) => plots.get(chart.id)?.setSize({ width: Math.max(200, boxes[i].clientWidth), height: 180 }));
  });
  boxes.forEach((b) => resize.observe(b));
  ctx.signal.addEventListener('abort', () => { resize.disconnect(); for (const p of plots.values()) p.destroy(); }, { once: true });

  async function loadHistory(signal) {
    const history = await call('GET', `/deployments/${id}/metrics/history`, undefined, { signal });
    historyNote.textContent = history.points.length === 0
      ? 'No samples yet: the server samples a running app every few seconds and keeps the last hour.'
      : `${history.points.length} samples, one every ${history.interval_seconds} s. Hover a chart for its values.`;
    if (history.points.length > 0 || plots.size > 0) draw(history.points);
  }

  async function sampleNow(signal) {
    if (!dep || dep.status !== 'running') {
      now.hidden = true;
      metricsNote.textContent = 'Live figures appear while the app runs.';
      restarts.textContent = '';
      return;
    }
    let m;
    try {
      m = await call('GET', `/deployments/${id}/metrics`, undefined, { signal });
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) { now.hidden = true; metricsNote.textContent = err.message; return; }
      throw err;
    }
    cpuValue.textContent = `${m.cpu_percent.toFixed(1)} %`;
    memValue.textContent = `${bytes(m.memory_bytes)} of ${bytes(m.memory_limit_bytes)}`;
    const last = lastPoints.at(-1);
    netValue.textContent = last && last.network_rx_bytes_per_second != null
      ? `${bytes(last.network_rx_bytes_per_second)}/s in, ${bytes(last.network_tx_bytes_per_second)}/s out`
      : `${bytes(m.network_rx_bytes)} in, ${bytes(m.network_tx_bytes)} out in all`;
    restarts.textContent = `Up since ${new Date(m.started_at).toLocaleString()}; ${m.restarts === 0 ? 'no crash restarts' : `restarted ${m.restarts} time${m.restarts === 1 ? '' : 's'} after crashes`}.`;
    metricsNote.textContent = '';
    now.hidden = false;
  }

  ctx.poll(5000, loadHistory);
  // The engine takes about a second per live sample; every 5 s keeps one in flight at most.
  setTimeout(() => ctx.poll(5000, sampleNow), 500);
  return { update(next) { dep = next; } };
}
