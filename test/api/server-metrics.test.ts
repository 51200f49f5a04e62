// Unit tests: the Prometheus text the registry writes, and the figures read from an engine stats sample.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Gauge, Histogram, MetricsRegistry } from '../../src/core/metrics.js';
import { statusClass } from '../../src/api/server-metrics.js';
import { statsFigures } from '../../src/runtime/docker/container-stats.js';

test('the registry writes HELP, TYPE, labelled samples with escaping, and cumulative histogram buckets', () => {
  const r = new MetricsRegistry();
  const c = r.add(new Counter('x_total', 'Things.', ['app']));
  const h = r.add(new Histogram('x_seconds', 'Time.', [0.1, 1], ['app']));
  r.add(new Gauge('x_up', 'Up.', [], () => [{ labels: [], value: 1 }]));
  c.inc(['a"b\\c']);
  c.inc(['a"b\\c'], 2);
  h.observe(0.05, ['a']);
  h.observe(0.5, ['a']);
  h.observe(5, ['a']);
  assert.equal(
    r.render(),
    [
      '# HELP x_total Things.',
      '# TYPE x_total counter',
      'x_total{app="a\\"b\\\\c"} 3',
      '# HELP x_seconds Time.',
      '# TYPE x_seconds histogram',
      'x_seconds_bucket{app="a",le="0.1"} 1',
      'x_seconds_bucket{app="a",le="1"} 2',
      'x_seconds_bucket{app="a",le="+Inf"} 3',
      'x_seconds_sum{app="a"} 5.55',
      'x_seconds_count{app="a"} 3',
      '# HELP x_up Up.',
      '# TYPE x_up gauge',
      'x_up 1',
      '',
    ].join('\n'),
  );
  assert.throws(() => r.add(new Counter('x_total', 'again')), /twice/);
});

test('status classes', () => {
  assert.deepEqual([101, 200, 304, 404, 502, 599, 0, 600].map(statusClass), ['1xx', '2xx', '3xx', '4xx', '5xx', '5xx', 'none', 'none']);
});

test('CPU percent comes from the cpu/precpu deltas scaled to the CPUs; memory excludes inactive page cache', () => {
  const figures = statsFigures({
    cpu_stats: { cpu_usage: { total_usage: 3_000_000_000 }, system_cpu_usage: 110_000_000_000, online_cpus: 2 },
    precpu_stats: { cpu_usage: { total_usage: 2_500_000_000 }, system_cpu_usage: 108_000_000_000 },
    memory_stats: { usage: 10_000_000, limit: 67_108_864, stats: { inactive_file: 4_000_000 } },
    networks: { eth0: { rx_bytes: 100, tx_bytes: 40 }, eth1: { rx_bytes: 1, tx_bytes: 2 } },
  });
  // 0.5 s of CPU in 2 s of system time on 2 CPUs = 50 % of one CPU.
  assert.deepEqual(figures, { cpuPercent: 50, memoryBytes: 6_000_000, memoryLimitBytes: 67_108_864, networkRxBytes: 101, networkTxBytes: 42 });
  // cgroup v1 names the cache total_inactive_file; no previous sample means no CPU figure yet.
  const v1 = statsFigures({
    cpu_stats: { cpu_usage: { total_usage: 5, percpu_usage: [1, 2] }, system_cpu_usage: 10 },
    precpu_stats: {},
    memory_stats: { usage: 500, limit: 1000, stats: { total_inactive_file: 100 } },
  });
  assert.equal(v1.cpuPercent, 0);
  assert.equal(v1.memoryBytes, 400);
  assert.equal(v1.networkRxBytes, 0);
});
