// The metrics history (issue 26 item 6): bounded per deployment and in deployments, rates from
// counters, no rate across a new container.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MetricsHistory, type MetricsSample } from '../../src/domain/metrics-history.js';

const sample = (at: number, over: Partial<MetricsSample> = {}): MetricsSample => ({
  at, containerId: 'c1', cpuPercent: 1, memoryBytes: 100, memoryLimitBytes: 1000, networkRxBytes: 0, networkTxBytes: 0, ...over,
});

test('keeps at most `capacity` samples per deployment, newest last', () => {
  const history = new MetricsHistory({ capacity: 3 });
  for (let i = 0; i < 10; i += 1) history.record('a', sample(i * 10_000, { cpuPercent: i }));
  assert.deepEqual(history.points('a').map((p) => p.cpu_percent), [7, 8, 9]);
});

test('keeps at most `maxDeployments`, dropping the one sampled least recently', () => {
  const history = new MetricsHistory({ maxDeployments: 2 });
  history.record('a', sample(0));
  history.record('b', sample(0));
  history.record('a', sample(10_000));
  history.record('c', sample(10_000));
  assert.equal(history.size, 2);
  assert.equal(history.points('b').length, 0, 'b was sampled least recently');
  assert.equal(history.points('a').length, 2);
});

test('network rates are bytes per second between samples of the same container; none across a new one', () => {
  const history = new MetricsHistory();
  history.record('a', sample(0, { networkRxBytes: 0, networkTxBytes: 0 }));
  history.record('a', sample(10_000, { networkRxBytes: 5000, networkTxBytes: 1000 }));
  history.record('a', sample(20_000, { containerId: 'c2', networkRxBytes: 10, networkTxBytes: 10 }));
  const points = history.points('a');
  assert.deepEqual(points.map((p) => [p.network_rx_bytes_per_second, p.network_tx_bytes_per_second]), [[null, null], [500, 100], [null, null]]);
  assert.equal(points[1]?.at, new Date(10_000).toISOString());
});

test('prune drops stopped deployments whose last sample is old, keeps live ones', () => {
  const history = new MetricsHistory();
  history.record('live', sample(0));
  history.record('gone', sample(0));
  history.record('recent', sample(50_000));
  history.prune(new Set(['live']), 10_000);
  assert.deepEqual(['live', 'gone', 'recent'].map((id) => history.points(id).length), [1, 0, 1]);
});
