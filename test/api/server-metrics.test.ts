// Unit tests: the Prometheus text a scrape of GET /metrics gets (families on a registry per server), and the figures read from an engine stats sample.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry, register as globalRegistry } from 'prom-client';
import { createServerMetrics, statusClass, type AppServerFigures } from '../../src/api/server-metrics.js';
import { parseExposition, sampleValue } from '../helpers/prometheus.js';
import { statsFigures } from '../../src/runtime/docker/container-stats.js';

function figures(server: string, app: string | undefined, twoxx: number, serving = true, averageSeconds = 0.02): AppServerFigures {
  return { server, app, serving, responses: { '1xx': 0, '2xx': twoxx, '3xx': 0, '4xx': 1, '5xx': 0, none: 0 }, averageSeconds };
}

test('the scrape text: every family typed, requests by app and class with escaped labels, cumulative buckets, builds from zero', async () => {
  let tunnels = 2;
  const m = createServerMetrics(new Registry(), { liveTunnels: () => tunnels, dataPlane: () => ({ plane: 'node', up: true }) });
  let text = parseExposition(await m.render());
  assert.deepEqual(text.types, [
    'slipway_http_requests_total counter',
    'slipway_http_request_duration_seconds histogram',
    'slipway_builds_total counter',
    'slipway_build_duration_seconds histogram',
    'slipway_tunnels_live gauge',
    'slipway_data_plane_up gauge',
  ]);
  assert.match(text.help.get('slipway_http_requests_total') ?? '', /by app/);
  // Before anything happened: the build outcomes at 0, the gauges read from their sources.
  assert.deepEqual(text.samples, [
    { name: 'slipway_builds_total', labels: { outcome: 'succeeded' }, value: 0 },
    { name: 'slipway_builds_total', labels: { outcome: 'failed' }, value: 0 },
    { name: 'slipway_builds_total', labels: { outcome: 'cancelled' }, value: 0 },
    { name: 'slipway_tunnels_live', labels: {}, value: 2 },
    { name: 'slipway_data_plane_up', labels: { plane: 'node' }, value: 1 },
  ]);

  const odd = 'a"b\\c\nd';
  m.requestEnded('web', 200, 0.004);
  m.requestEnded('web', 204, 0.3);
  m.requestEnded('web', 404, 45);
  m.requestEnded('web', 0, 100);
  m.requestEnded(odd, 503, 0.01);
  m.requestEnded('', 404, 0.001);
  m.buildEnded('succeeded', 42);
  m.buildEnded('failed', 7000);
  tunnels = 0;
  const raw = await m.render();
  assert.ok(raw.includes('app="a\\"b\\\\c\\nd"'), 'quote, backslash and newline escaped in the label value');
  text = parseExposition(raw);
  const v = (name: string, labels: Record<string, string> = {}): number | undefined => sampleValue(text, name, labels);
  assert.equal(v('slipway_http_requests_total', { app: 'web', code: '2xx' }), 2);
  assert.equal(v('slipway_http_requests_total', { app: 'web', code: '4xx' }), 1);
  assert.equal(v('slipway_http_requests_total', { app: 'web', code: 'none' }), 1);
  assert.equal(v('slipway_http_requests_total', { app: 'web', code: '5xx' }), undefined, 'no series for a class never seen');
  assert.equal(v('slipway_http_requests_total', { app: odd, code: '5xx' }), 1);
  assert.equal(v('slipway_http_requests_total', { app: '', code: '4xx' }), 1);
  // Cumulative buckets: 0.004 ≤ 0.005, 0.3 ≤ 0.5, 45 ≤ 60, 100 only in +Inf.
  assert.deepEqual(
    ['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '30', '60', '+Inf'].map((le) => v('slipway_http_request_duration_seconds_bucket', { app: 'web', le })),
    [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 4],
  );
  assert.equal(v('slipway_http_request_duration_seconds_count', { app: 'web' }), 4);
  assert.ok(Math.abs((v('slipway_http_request_duration_seconds_sum', { app: 'web' }) ?? 0) - 145.304) < 1e-9);
  assert.equal(v('slipway_builds_total', { outcome: 'succeeded' }), 1);
  assert.equal(v('slipway_builds_total', { outcome: 'failed' }), 1);
  assert.equal(v('slipway_builds_total', { outcome: 'cancelled' }), 0);
  assert.deepEqual(
    ['5', '10', '30', '60', '120', '300', '600', '1200', '1800', '3600', '+Inf'].map((le) => v('slipway_build_duration_seconds_bucket', { outcome: 'succeeded', le })),
    [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
  );
  assert.equal(v('slipway_build_duration_seconds_bucket', { outcome: 'failed', le: '3600' }), 0);
  assert.equal(v('slipway_build_duration_seconds_bucket', { outcome: 'failed', le: '+Inf' }), 1);
  assert.equal(v('slipway_build_duration_seconds_sum', { outcome: 'failed' }), 7000);
  assert.equal(v('slipway_build_duration_seconds_count', { outcome: 'cancelled' }), undefined, 'no histogram series before a build of that outcome');
  assert.equal(v('slipway_tunnels_live'), 0);
  // A scrape changes no count.
  assert.deepEqual(parseExposition(await m.render()).samples, text.samples);
});

test("HAProxy's figures join the Node counts per app; a failed read keeps the last figures; averages only of serving servers", async () => {
  let read: () => Promise<readonly AppServerFigures[]> = async () => [
    figures('s1', 'web', 5, false, 9),
    figures('s2', 'web', 2, true, 0.02),
    figures('retired:web', 'web', 10, false, Number.NaN),
    figures('stray', undefined, 99),
  ];
  let up = true;
  const m = createServerMetrics(new Registry(), { liveTunnels: () => 0, dataPlane: () => ({ plane: 'haproxy', up }), haproxyServers: () => read() });
  m.requestEnded('web', 200, 0.1);
  m.requestEnded('web', 404, 0.1);
  let text = parseExposition(await m.render());
  assert.ok(text.types.includes('slipway_haproxy_response_time_seconds gauge'));
  // Node's 2xx and 4xx plus each HAProxy server's (2xx as given, one 4xx each); the server of no app is left out.
  assert.deepEqual(
    text.samples.filter((s) => s.name === 'slipway_http_requests_total'),
    [
      { name: 'slipway_http_requests_total', labels: { app: 'web', code: '2xx' }, value: 1 + 5 + 2 + 10 },
      { name: 'slipway_http_requests_total', labels: { app: 'web', code: '4xx' }, value: 1 + 3 },
    ],
  );
  assert.deepEqual(
    text.samples.filter((s) => s.name === 'slipway_haproxy_response_time_seconds'),
    [{ name: 'slipway_haproxy_response_time_seconds', labels: { app: 'web' }, value: 0.02 }],
  );
  assert.equal(sampleValue(text, 'slipway_data_plane_up', { plane: 'haproxy' }), 1);
  // HAProxy down: the read fails, the last figures stand and the plane says down.
  read = async () => {
    throw new Error('connect ENOENT');
  };
  up = false;
  text = parseExposition(await m.render());
  assert.equal(sampleValue(text, 'slipway_http_requests_total', { app: 'web', code: '2xx' }), 18);
  assert.equal(sampleValue(text, 'slipway_data_plane_up', { plane: 'haproxy' }), 0);
  // s1 was removed and its final counts moved to the retired row: the app's total does not drop.
  read = async () => [figures('s2', 'web', 3), figures('retired:web', 'web', 15, false, Number.NaN)];
  up = true;
  text = parseExposition(await m.render());
  assert.equal(sampleValue(text, 'slipway_http_requests_total', { app: 'web', code: '2xx' }), 1 + 3 + 15);
  assert.equal(sampleValue(text, 'slipway_http_requests_total', { app: 'web', code: '4xx' }), 1 + 2);
});

test('scrapes at the same time each get the counts, none doubled', async () => {
  const m = createServerMetrics(new Registry(), {
    liveTunnels: () => 0,
    dataPlane: () => ({ plane: 'haproxy', up: true }),
    haproxyServers: async () => [figures('s1', 'web', 4)],
  });
  m.requestEnded('web', 200, 0.1);
  m.requestEnded('api', 500, 0.1);
  const texts = await Promise.all([m.render(), m.render(), m.render()]);
  for (const text of texts) {
    assert.equal(sampleValue(text, 'slipway_http_requests_total', { app: 'web', code: '2xx' }), 5);
    assert.equal(sampleValue(text, 'slipway_http_requests_total', { app: 'api', code: '5xx' }), 1);
  }
});

test('two servers in one process count apart, and nothing lands in the global registry', async () => {
  const sources = { liveTunnels: () => 0, dataPlane: () => ({ plane: 'node', up: true }) };
  const a = createServerMetrics(new Registry(), sources);
  const b = createServerMetrics(new Registry(), sources);
  a.requestEnded('web', 200, 0.1);
  a.buildEnded('succeeded', 10);
  const textA = await a.render();
  const textB = await b.render();
  assert.equal(sampleValue(textA, 'slipway_http_requests_total', { app: 'web', code: '2xx' }), 1);
  assert.equal(sampleValue(textA, 'slipway_builds_total', { outcome: 'succeeded' }), 1);
  assert.equal(sampleValue(textB, 'slipway_http_requests_total', { app: 'web', code: '2xx' }), undefined);
  assert.equal(sampleValue(textB, 'slipway_builds_total', { outcome: 'succeeded' }), 0);
  assert.deepEqual(globalRegistry.getMetricsAsArray(), [], 'the default registry stays empty');
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
