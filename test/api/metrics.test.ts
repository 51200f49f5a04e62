// Metrics against the real engine and server: a deployment's live figures from the engine's stats
// (owner only, 409 when nothing runs) and GET /metrics in Prometheus text (administrators only).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, assertUnauthorized } from '../helpers/api-assert.js';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait } from '../helpers/apps.js';
import { sampleValue } from '../helpers/prometheus.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The value of one series (`name{a="x",b="y"}`, labels in any order) of a Prometheus text body, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const m = /^([^{]+)(?:\{(.*)\})?$/.exec(series);
  assert.ok(m !== null, series);
  const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
  return sampleValue(text, m[1]!, labels);
}

describe('metrics', () => {
  let s: TestServer;
  let alice: Awaited<ReturnType<TestServer['newUser']>>;
  let bob: Awaited<ReturnType<TestServer['newUser']>>;
  let app: { id: string; subdomain: string };

  before(async () => {
    s = await startTestServer();
    alice = await s.newUser('metrics-a');
    bob = await s.newUser('metrics-b');
    const { archive } = await busyboxArchive();
    app = await createArchiveApp(s, alice.token, archive, { memory_mb: 64 });
    const deployed = await deployAndWait(s, alice.token, app.id);
    assert.equal(deployed.status, 200, deployed.text);
  });
  after(async () => {
    await s?.close();
  });

  test("a running deployment's metrics come from its container: memory within the limit set, traffic counted", async () => {
    for (let i = 0; i < 3; i += 1) assert.equal((await appRequest(s.port, app.subdomain)).status, 200);
    const res = await s.request('GET', `/api/v1/deployments/${app.id}/metrics`, { token: alice.token });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.json).sort(), [
      'cpu_percent', 'memory_bytes', 'memory_limit_bytes', 'network_rx_bytes', 'network_tx_bytes', 'replicas', 'restarts', 'started_at',
    ]);
    const m = res.json;
    assert.equal(m.memory_limit_bytes, 64 * 1024 * 1024, 'the limit is the deployment memory_mb');
    assert.ok(m.memory_bytes > 0 && m.memory_bytes < m.memory_limit_bytes, `memory in use ${m.memory_bytes}`);
    assert.ok(typeof m.cpu_percent === 'number' && m.cpu_percent >= 0, `cpu ${m.cpu_percent}`);
    assert.ok(m.network_rx_bytes > 0 && m.network_tx_bytes > 0, `the requests reached the container: ${m.network_rx_bytes}/${m.network_tx_bytes}`);
    assert.equal(m.restarts, 0);
    const started = Date.parse(m.started_at);
    assert.ok(started > Date.now() - 10 * 60_000 && started <= Date.now() + 1000, `started_at ${m.started_at}`);
  });

  test("another user's deployment, or a path that is no UUID, is not found", async () => {
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/metrics`, { token: bob.token }), 404, 'not_found', 'bob');
    assertError(await s.request('GET', '/api/v1/deployments/nope/metrics', { token: alice.token }), 404, 'not_found', 'not a UUID');
    assertUnauthorized(await s.request('GET', `/api/v1/deployments/${app.id}/metrics`), 'no bearer');
  });

  test('nothing running answers 409 invalid_state: never deployed, and stopped', async () => {
    const created = await s.request('POST', '/api/v1/deployments', {
      token: alice.token,
      body: { name: 'idle', subdomain: `idle-${process.pid}`, source_type: 'archive' },
    });
    assert.equal(created.status, 201, created.text);
    assertError(await s.request('GET', `/api/v1/deployments/${created.json.id}/metrics`, { token: alice.token }), 409, 'invalid_state', 'pending');
    const { archive } = await busyboxArchive();
    const stopped = await createArchiveApp(s, alice.token, archive);
    assert.equal((await deployAndWait(s, alice.token, stopped.id)).status, 200);
    assert.equal((await s.request('POST', `/api/v1/deployments/${stopped.id}/stop`, { token: alice.token })).status, 200);
    assertError(await s.request('GET', `/api/v1/deployments/${stopped.id}/metrics`, { token: alice.token }), 409, 'invalid_state', 'stopped');
  });

  test('GET /metrics: none → 401, a user → 403, the admin → Prometheus text', async () => {
    assertUnauthorized(await s.request('GET', '/metrics'), 'no bearer');
    assertError(await s.request('GET', '/metrics', { token: alice.token }), 403, 'forbidden', 'not an admin');
    assertError(await s.request('GET', '/metrics', { token: alice.apiKey }), 403, 'forbidden', 'not an admin (key)');
    const res = await s.request('GET', '/metrics', { token: s.adminToken });
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    for (const name of ['slipway_http_requests_total', 'slipway_http_request_duration_seconds', 'slipway_builds_total', 'slipway_build_duration_seconds', 'slipway_tunnels_live', 'slipway_data_plane_up']) {
      assert.match(res.text, new RegExp(`^# TYPE ${name} (counter|histogram|gauge)$`, 'm'), name);
    }
  });

  test('GET /metrics counts app requests by app and status class, with latency, and builds by outcome', async () => {
    const scrape = async (): Promise<string> => (await s.request('GET', '/metrics', { token: s.adminToken })).text;
    const before = await scrape();
    const ok = `slipway_http_requests_total{app="${app.subdomain}",code="2xx"}`;
    const missing = `slipway_http_requests_total{app="${app.subdomain}",code="4xx"}`;
    const okBefore = sample(before, ok) ?? 0;
    const missingBefore = sample(before, missing) ?? 0;
    for (let i = 0; i < 4; i += 1) assert.equal((await appRequest(s.port, app.subdomain)).status, 200);
    assert.equal((await appRequest(s.port, app.subdomain, { path: '/no-such-file' })).status, 404);
    assert.equal((await appRequest(s.port, `nobody-${process.pid}`)).status, 404);
    const text = await scrape();
    assert.equal(sample(text, ok), okBefore + 4);
    assert.equal(sample(text, missing), missingBefore + 1);
    assert.ok((sample(text, 'slipway_http_requests_total{app="",code="4xx"}') ?? 0) >= 1, 'an unknown host counts under app=""');
    const count = sample(text, `slipway_http_request_duration_seconds_count{app="${app.subdomain}"}`) ?? 0;
    assert.equal(count, okBefore + missingBefore + 5, 'every request is in the latency histogram');
    assert.equal(sample(text, `slipway_http_request_duration_seconds_bucket{app="${app.subdomain}",le="+Inf"}`), count);
    assert.ok((sample(text, `slipway_http_request_duration_seconds_bucket{app="${app.subdomain}",le="60"}`) ?? 0) === count);
    // Two deploys succeeded in this suite (before() and the stopped app), none failed yet.
    assert.equal(sample(text, 'slipway_builds_total{outcome="succeeded"}'), 2);
    assert.equal(sample(text, 'slipway_build_duration_seconds_count{outcome="succeeded"}'), 2);
    assert.ok((sample(text, 'slipway_build_duration_seconds_sum{outcome="succeeded"}') ?? 0) > 0);
    assert.equal(sample(text, 'slipway_builds_total{outcome="failed"}'), 0);
    assert.equal(sample(text, 'slipway_tunnels_live'), 0);
    assert.equal(sample(text, 'slipway_data_plane_up{plane="node"}'), 1);

    const { archive } = await busyboxArchive({ exitAtOnce: true });
    const broken = await createArchiveApp(s, alice.token, archive);
    assert.equal((await deployAndWait(s, alice.token, broken.id)).status, 500);
    const after = await scrape();
    assert.equal(sample(after, 'slipway_builds_total{outcome="failed"}'), 1);
    assert.equal(sample(after, 'slipway_build_duration_seconds_count{outcome="failed"}'), 1);
  });
});

describe('metrics with the HAProxy data plane', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ SLIPWAY_DATA_PLANE: 'haproxy' });
  });
  after(async () => {
    await s?.close();
  });

  test("requests HAProxy sends straight to an app are counted from its runtime API, and survive a new release's server", async () => {
    const user = await s.newUser('metrics-h');
    const { archive } = await busyboxArchive();
    const app = await createArchiveApp(s, user.token, archive);
    assert.equal((await deployAndWait(s, user.token, app.id)).status, 200);
    const scrape = async (): Promise<string> => (await s.request('GET', '/metrics', { token: s.adminToken })).text;
    const ok = `slipway_http_requests_total{app="${app.subdomain}",code="2xx"}`;
    for (let i = 0; i < 3; i += 1) assert.equal((await appRequest(s.port, app.subdomain)).status, 200);
    let text = await scrape();
    assert.equal(sample(text, 'slipway_data_plane_up{plane="haproxy"}'), 1);
    assert.equal(sample(text, ok), 3);
    assert.ok((sample(text, `slipway_haproxy_response_time_seconds{app="${app.subdomain}"}`) ?? -1) >= 0);
    // A new release gets a new HAProxy server (whose counters start at zero); the total does not drop.
    assert.equal((await deployAndWait(s, user.token, app.id)).status, 200);
    for (let i = 0; i < 2; i += 1) assert.equal((await appRequest(s.port, app.subdomain)).status, 200);
    text = await scrape();
    assert.equal(sample(text, ok), 5);
  });
});
