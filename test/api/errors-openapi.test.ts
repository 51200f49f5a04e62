// API tests: the error contract ({error, message} everywhere, no stacks or secrets), media types, OpenAPI, health; plus in-process inject() tests.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/api/app.js';
import { BuildLogStore } from '../../src/deploy/build-logs.js';
import { loadConfig } from '../../src/config.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import { databaseWebhookStore } from '../../src/db/webhook-store.js';
import { databasePreviewCatalog } from '../../src/db/preview-catalog.js';
import { databaseInstanceRegistry } from '../../src/db/instance-registry.js';
import { databaseQuotaStore } from '../../src/db/quota-store.js';
import { QuotaGuard } from '../../src/domain/quotas.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import { DbAppConfigStore } from '../../src/db/app-config-store.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { bootstrapAdmin } from '../../src/domain/accounts.js';
import type { BuildRow } from '../../src/domain/builds.js';
import { DomainError } from '../../src/core/errors.js';
import type { DeploymentMetrics, DeploymentOperations } from '../../src/domain/operations.js';
import type { Principal } from '../../src/core/principal.js';
import { KeyUsage } from '../../src/domain/key-usage.js';
import { ListCursors } from '../../src/api/list-pages.js';
import { FailureLimiter } from '../../src/domain/rate-limiter.js';
import { SourceStore } from '../../src/source/source-store.js';
import { assertError, assertNoLeak } from '../helpers/api-assert.js';
import { buildMultipart } from '../helpers/multipart.js';
import { ADMIN_PASSWORD, startTestServer, testEnv, type HttpResult, type TestServer } from '../helpers/server.js';
import { NO_CERTIFICATES } from '../../src/domain/custom-domains.js';
import { databaseCustomDomainStore } from '../../src/db/custom-domain-store.js';
import { databaseApiKeyStore } from '../../src/db/api-key-store.js';
import { databaseAccountStore } from '../../src/db/account-store.js';
import { databaseAuditLog } from '../../src/db/audit-log.js';
import { databaseTeamStore } from '../../src/db/team-store.js';

/** Every route of the API, as the OpenAPI document names it. */
const ROUTES: ReadonlyArray<readonly [string, string]> = [
  ['post', '/api/v1/auth/login'],
  ['post', '/api/v1/auth/logout'],
  ['get', '/api/v1/users/me'],
  ['put', '/api/v1/users/me/password'],
  ['post', '/api/v1/users'],
  ['get', '/api/v1/api-keys'],
  ['post', '/api/v1/api-keys'],
  ['delete', '/api/v1/api-keys/{id}'],
  ['get', '/api/v1/deployments'],
  ['post', '/api/v1/deployments'],
  ['get', '/api/v1/deployments/{id}'],
  ['patch', '/api/v1/deployments/{id}'],
  ['delete', '/api/v1/deployments/{id}'],
  ['post', '/api/v1/deployments/{id}/upload'],
  ['post', '/api/v1/deployments/{id}/deploy'],
  ['post', '/api/v1/deployments/{id}/stop'],
  ['post', '/api/v1/deployments/{id}/restart'],
  ['post', '/api/v1/deployments/{id}/cancel'],
  ['post', '/api/v1/deployments/{id}/rollback'],
  ['get', '/api/v1/deployments/{id}/logs'],
  ['get', '/api/v1/deployments/{id}/builds'],
  ['get', '/api/v1/deployments/{id}/builds/{build_id}'],
  ['get', '/api/v1/deployments/{id}/builds/{build_id}/logs'],
  ['get', '/api/v1/deployments/{id}/domains'],
  ['post', '/api/v1/deployments/{id}/domains'],
  ['delete', '/api/v1/deployments/{id}/domains/{domain_id}'],
  ['get', '/api/v1/tunnels'],
  ['post', '/api/v1/deployments/{id}/webhook'],
  ['get', '/api/v1/deployments/{id}/webhook'],
  ['get', '/api/v1/deployments/{id}/webhook/deliveries'],
  ['post', '/api/v1/hooks/{id}'],
];

describe('errors, media types, OpenAPI and health over a socket', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let deploymentId: string;
  const responses: HttpResult[] = [];
  before(async () => {
    s = await startTestServer();
    user = await s.newUser('errors');
    const dep = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'e', subdomain: `errors-${process.pid}`, source_type: 'archive' } });
    deploymentId = dep.json.id;
  });
  after(async () => {
    for (const res of responses) assertNoLeak(res, [user.password, user.apiKey, user.token, ADMIN_PASSWORD, s.adminToken]);
    await s.close();
  });
  const req = async (...args: Parameters<TestServer['request']>): Promise<HttpResult> => {
    const res = await s.request(...args);
    responses.push(res);
    return res;
  };
  const count = async (): Promise<number> => (await s.request('GET', '/api/v1/deployments', { token: user.token })).json.length;

  test('malformed JSON is 400 validation_error', async () => {
    const before = await count();
    for (const raw of ['{"name":', '{name: "x"}', 'nope', '{"a":1}}', '{"__proto__":{"admin":true},"name":"x","subdomain":"y"}']) {
      assertError(await req('POST', '/api/v1/deployments', { token: user.token, raw, headers: { 'content-type': 'application/json' } }), 400, 'validation_error', raw);
    }
    assertError(await req('POST', '/api/v1/auth/login', { raw: '{"email":', headers: { 'content-type': 'application/json' } }), 400, 'validation_error');
    assertError(await req('POST', '/api/v1/deployments', { token: user.token, raw: '', headers: { 'content-type': 'application/json' } }), 400, 'validation_error', 'empty body');
    assert.equal(await count(), before);
  });

  test('a JSON endpoint refuses other media types with 415 unsupported_media_type', async () => {
    const before = await count();
    const json = JSON.stringify({ name: 'm', subdomain: `media-${process.pid}`, source_type: 'archive' });
    const multipart = buildMultipart([{ name: 'name', content: 'm' }, { name: 'subdomain', content: `media-${process.pid}` }]);
    const cases: Array<[string, string | Buffer]> = [
      ['text/plain', json],
      ['text/plain;charset=UTF-8', json],
      ['application/x-www-form-urlencoded', 'name=m&subdomain=x'],
      ['application/xml', '<x/>'],
      ['application/octet-stream', json],
      [multipart.contentType, multipart.body],
    ];
    for (const [contentType, raw] of cases) {
      assertError(await req('POST', '/api/v1/deployments', { token: user.token, raw, headers: { 'content-type': contentType } }), 415, 'unsupported_media_type', contentType);
      assertError(await req('POST', '/api/v1/api-keys', { token: user.token, raw, headers: { 'content-type': contentType } }), 415, 'unsupported_media_type', `api-keys ${contentType}`);
    }
    assertError(await req('POST', '/api/v1/auth/login', { raw: 'email=a&password=b', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'unsupported_media_type');
    assertError(await req('PUT', '/api/v1/users/me/password', { token: user.token, raw: 'x', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
    assert.equal(await count(), before);
    assert.equal((await s.request('GET', '/api/v1/api-keys', { token: user.token })).json.length, 1);
  });

  test('a bodiless POST labelled JSON with an empty body is accepted', async () => {
    const res = await req('POST', `/api/v1/deployments/${deploymentId}/deploy`, { token: user.token, raw: '', headers: { 'content-type': 'application/json' } });
    assertError(res, 409, 'invalid_state', 'the deploy reached the use-case');
  });

  test('unknown routes are 404 not_found JSON, with or without credentials', async () => {
    for (const [method, urlPath, token] of [
      ['GET', '/api/v1/nope', undefined],
      ['GET', '/api/v1/nope', user.token],
      ['POST', '/api/v2/deployments', user.token],
      ['GET', '/api/v1/deployments/x/y/z', user.token],
      ['PUT', `/api/v1/deployments/${deploymentId}`, user.token],
      ['GET', '/nothing-here', undefined],
      ['GET', '/.env', undefined],
    ] as const) {
      assertError(await req(method, urlPath, { token }), 404, 'not_found', `${method} ${urlPath}`);
    }
  });

  test("the router's own errors are {error, message} too: bad percent-encoding is 400, an over-long id is a 404 like any non-UUID", async () => {
    assertError(await req('GET', '/api/v1/deployments/%E0%A4%A', { token: user.token }), 400, 'validation_error', 'bad percent-encoding');
    assertError(await req('GET', `/api/v1/deployments/${'a'.repeat(300)}`, { token: user.token }), 404, 'not_found', '300-character id');
    assertError(await req('GET', `/api/v1/deployments/${'a'.repeat(300)}`), 401, 'unauthorized', '300-character id, no credential');
    assertError(await req('DELETE', `/api/v1/api-keys/${'b'.repeat(2000)}`, { token: user.token }), 404, 'not_found', '2000-character id');
  });

  test('a JSON body over 1 MiB is 413 payload_too_large', async () => {
    const before = await count();
    const res = await req('POST', '/api/v1/deployments', { token: user.token, body: { name: 'x', subdomain: `big-${process.pid}`, source_type: 'archive', dockerfile_path: 'a'.repeat(1024 * 1024) } });
    assertError(res, 413, 'payload_too_large');
    assertError(await req('POST', '/api/v1/auth/login', { body: { email: 'a@b.c', password: 'p'.repeat(1_100_000) } }), 413, 'payload_too_large');
    assert.equal(await count(), before);
  });

  test('malformed multipart uploads are 400, never a hang or a 500', async () => {
    const send = (raw: string, contentType: string): Promise<HttpResult> =>
      req('POST', `/api/v1/deployments/${deploymentId}/upload`, { token: user.token, raw, headers: { 'content-type': contentType } });
    const started = Date.now();
    assertError(await send('--xx\r\nContent-Disposition: form-data; name="archive"; filename="a.tar.gz"\r\n\r\nabc', 'multipart/form-data; boundary=xx'), 400, 'validation_error', 'body ends inside the file');
    assertError(await send('abc', 'multipart/form-data'), 400, 'validation_error', 'no boundary');
    assertError(await send('--xx\r\nGarbage\r\n\r\nabc\r\n--xx--\r\n', 'multipart/form-data; boundary=xx'), 400, 'validation_error', 'bad part header');
    assertError(await send('', 'multipart/form-data; boundary=xx'), 400, 'validation_error', 'empty');
    assert.ok(Date.now() - started < 10_000, 'answered promptly');
    assert.equal((await s.request('GET', `/api/v1/deployments/${deploymentId}`, { token: user.token })).json.status, 'pending');
  });

  test('a client-side failure carries no stack, path or secret; bad credentials never echo the credential', async () => {
    const secretish = `slw_k1_${'Z'.repeat(43)}`;
    const res = await req('GET', '/api/v1/users/me', { headers: { authorization: `Bearer ${secretish}` } });
    assertError(res, 401, 'unauthorized');
    assertNoLeak(res, [secretish]);
    const login = await req('POST', '/api/v1/auth/login', { body: { email: user.email, password: 'a-wrong-password-xyz' } });
    assertNoLeak(login, ['a-wrong-password-xyz']);
    assert.doesNotMatch(JSON.stringify(responses.map((r) => r.text)), /\/work\/|node_modules|\.ts:\d+|\.js:\d+/);
  });

  test('GET /api/v1/openapi.json (no auth) is an OpenAPI 3 document with every route', async () => {
    const res = await req('GET', '/api/v1/openapi.json');
    assert.equal(res.status, 200);
    assert.match(res.json.openapi, /^3\./);
    assert.equal(typeof res.json.info.title, 'string');
    const paths = res.json.paths as Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> } }>>;
    for (const [method, p] of ROUTES) assert.ok(paths[p]?.[method] !== undefined, `${method.toUpperCase()} ${p} is not documented`);
    // Generated from the validating schemas: the create body lists its fields; the upload is multipart.
    const create = paths['/api/v1/deployments']?.['post']?.requestBody?.content['application/json']?.schema;
    assert.ok(create?.properties !== undefined && 'subdomain' in create.properties && 'repo_url' in create.properties);
    const upload = paths['/api/v1/deployments/{id}/upload']?.['post']?.requestBody?.content['multipart/form-data']?.schema;
    assert.ok(upload?.properties !== undefined && 'archive' in upload.properties && 'dockerfile' in upload.properties);
    assert.ok(res.json.components?.securitySchemes !== undefined);
    // Every operation documents its success answer; the log endpoints answer plain text.
    for (const [method, p] of ROUTES) {
      const responses = (paths[p]?.[method] as { responses?: Record<string, unknown> } | undefined)?.responses ?? {};
      assert.ok(Object.keys(responses).some((code) => /^2\d\d$/.test(code)), `${method.toUpperCase()} ${p} documents no 2xx answer`);
    }
    for (const p of ['/api/v1/deployments/{id}/logs', '/api/v1/deployments/{id}/builds/{build_id}/logs']) {
      const ok = (paths[p]?.['get'] as { responses?: Record<string, { content?: Record<string, unknown> }> } | undefined)?.responses?.['200'];
      assert.ok(ok?.content?.['text/plain'] !== undefined, `${p} documents its text answer`);
    }
    const health = paths['/healthz']?.['get'] as { security?: unknown[] } | undefined;
    assert.deepEqual(health?.security, [], '/healthz is documented as public');
  });

  test('GET /healthz (no auth) is 200 with the database and Docker checks', async () => {
    const res = await req('GET', '/healthz');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.checks.database.ok, true);
    assert.equal(res.json.checks.docker.ok, true);
  });
});

/** Operations that record calls; `fail` makes the next call throw it. */
class StubOperations implements DeploymentOperations {
  calls: string[] = [];
  fail: unknown = undefined;
  #check(name: string): void {
    this.calls.push(name);
    const err = this.fail;
    this.fail = undefined;
    if (err !== undefined) throw err;
  }
  async deploy(_p: Principal, deploymentId: string, options: { wait: boolean }): Promise<BuildRow> {
    this.#check(`deploy${options.wait ? ' wait' : ''}`);
    return {
      id: crypto.randomUUID(),
      deployment_id: deploymentId,
      status: options.wait ? 'succeeded' : 'building',
      commit_sha: 'a'.repeat(64),
      source_ref: 'internal-ref',
      error: null,
      image_id: 'sha256:internal',
      container_id: 'internal-container',
      upstreams: '[{"host":"127.0.0.1","port":49152}]',
      started_at: new Date().toISOString(),
      finished_at: options.wait ? new Date().toISOString() : null,
      seq: 1,
    };
  }
  async stop(): Promise<{ message: string }> {
    this.#check('stop');
    return { message: 'stopped' };
  }
  async cancel(): Promise<{ message: string }> {
    this.#check('cancel');
    return { message: 'cancelled' };
  }
  async restart(): Promise<{ message: string }> {
    this.#check('restart');
    return { message: 'restarted' };
  }
  async rollback(_p: Principal, _d: string, buildId: string): Promise<{ message: string }> {
    this.#check('rollback');
    return { message: `rolled back to build ${buildId}` };
  }
  async remove(): Promise<void> {
    this.#check('remove');
  }
  registered(deployment: { id: string; subdomain: string }): void {
    this.calls.push(`registered ${deployment.subdomain}`);
  }
  async metrics(): Promise<DeploymentMetrics> {
    this.#check('metrics');
    return { cpu_percent: 0, memory_bytes: 0, memory_limit_bytes: 0, network_rx_bytes: 0, network_tx_bytes: 0, restarts: 0, started_at: new Date(0).toISOString(), replicas: [] };
  }

  async metricsHistory(): Promise<[]> {
    this.#check('metricsHistory');
    return [];
  }
  async runtimeLogs(): Promise<AsyncIterable<string>> {
    this.#check('logs');
    return (async function* () {
      yield 'line 1\n';
      yield 'line 2\n';
    })();
  }
}

describe('the Fastify app in-process (inject)', () => {
  let app: FastifyInstance;
  let db: Db;
  let token: string;
  let deploymentId: string;
  const ops = new StubOperations();
  const logged: Array<{ msg: string; detail?: object }> = [];
  let healthy = true;

  before(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-inject-'));
    const config = loadConfig(testEnv(dir));
    db = await openDatabase({ file: path.join(dir, 'slipway.db') });
    await bootstrapAdmin(databaseAccountStore(db), { email: 'root@inject.local', password: 'inject-password-1' });
    app = await buildApp({
      config,
      deployments: databaseDeploymentCatalog(db),
      previews: databasePreviewCatalog(db),
      store: new SourceStore(dir),
      buildLogs: new BuildLogStore(dir),
      keyUsage: new KeyUsage(databaseApiKeyStore(db)),
      apiKeys: databaseApiKeyStore(db),
      accounts: databaseAccountStore(db),
      audit: databaseAuditLog(db),
      teams: databaseTeamStore(db),
      cursors: new ListCursors(new ValueCipher(crypto.randomBytes(32))),
      seal: new ValueCipher(crypto.randomBytes(32)),
      loginLimiter: new FailureLimiter({ maxFailures: 10, windowMs: 60_000 }),
      operations: ops,
      configs: new DbAppConfigStore(db, new ValueCipher(crypto.randomBytes(32))),
      webhooks: databaseWebhookStore(db, new ValueCipher(crypto.randomBytes(32))),
      hookLimiter: new FailureLimiter({ maxFailures: 60, windowMs: 60_000 }),
      quotas: new QuotaGuard(databaseQuotaStore(db), config.quotas),
      branchTip: async (_url: string, branch: string | undefined) => ({ sha: null, branch: branch ?? 'main' }),
      tunnels: { list: () => [], closeForKey: () => undefined, closeForUser: () => undefined },
      instances: databaseInstanceRegistry(db),
      nodes: { list: async () => [], setAvailability: async () => undefined },
      metrics: { render: () => '' },
      domains: databaseCustomDomainStore(db),
      hosts: { addHost: () => undefined, removeHost: () => undefined },
      certificates: NO_CERTIFICATES,
      health: async () => ({ ok: healthy, checks: { database: { ok: true }, docker: healthy ? { ok: true } : { ok: false, detail: 'the Docker engine does not answer' } } }),
      log: (_level, msg, detail) => logged.push({ msg, ...(detail === undefined ? {} : { detail }) }),
    });
    await app.ready();
    const login = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: 'root@inject.local', password: 'inject-password-1' } });
    assert.equal(login.statusCode, 200, login.body);
    token = login.json().token;
    const dep = await app.inject({
      method: 'POST',
      url: '/api/v1/deployments',
      headers: { authorization: `Bearer ${token}` },
      payload: { name: 'inject', subdomain: 'inject', source_type: 'archive' },
    });
    assert.equal(dep.statusCode, 201, dep.body);
    deploymentId = dep.json().id;
  });
  after(async () => {
    await app.close();
    await db.destroy();
  });

  const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
    app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload === undefined ? {} : { payload }) });

  test('deploy answers 202 with the build record, never its internals; wait=true answers 200', async () => {
    assert.ok(ops.calls.includes('registered inject'), 'a created deployment is registered with the lifecycle');
    const res = await call('POST', `/api/v1/deployments/${deploymentId}/deploy`);
    assert.equal(res.statusCode, 202, res.body);
    assert.deepEqual(Object.keys(res.json()).sort(), ['commit_sha', 'deployment_id', 'error', 'finished_at', 'id', 'started_at', 'status']);
    assert.equal(res.json().status, 'building');
    assert.equal(res.json().finished_at, null);
    assert.doesNotMatch(res.body, /internal/);
    const waited = await call('POST', `/api/v1/deployments/${deploymentId}/deploy?wait=true`);
    assert.equal(waited.statusCode, 200);
    assert.equal(waited.json().status, 'succeeded');
    assert.deepEqual(ops.calls.slice(-2), ['deploy', 'deploy wait']);
  });

  test('stop, restart, cancel and rollback answer 200 {message}; runtime logs are text', async () => {
    for (const action of ['stop', 'restart', 'cancel']) {
      const res = await call('POST', `/api/v1/deployments/${deploymentId}/${action}`);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(Object.keys(res.json()), ['message']);
    }
    const buildId = crypto.randomUUID();
    const rb = await call('POST', `/api/v1/deployments/${deploymentId}/rollback`, { build_id: buildId });
    assert.equal(rb.statusCode, 200);
    assert.match(rb.json().message, new RegExp(buildId));
    const logs = await call('GET', `/api/v1/deployments/${deploymentId}/logs?tail=5`);
    assert.equal(logs.statusCode, 200);
    assert.match(String(logs.headers['content-type']), /^text\/plain/);
    assert.equal(logs.body, 'line 1\nline 2\n');
  });

  test('a domain error keeps its code; build_failed is 500 with its message', async () => {
    ops.fail = new DomainError('build_failed', 'step 2/3: COPY failed: file not found');
    const res = await call('POST', `/api/v1/deployments/${deploymentId}/deploy?wait=true`);
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), { error: 'build_failed', message: 'step 2/3: COPY failed: file not found' });
    ops.fail = new DomainError('invalid_state', 'no build to roll back to');
    const state = await call('POST', `/api/v1/deployments/${deploymentId}/stop`);
    assert.equal(state.statusCode, 409);
    assert.equal(state.json().error, 'invalid_state');
  });

  test('an unexpected error is 500 internal_error without detail, and is logged with it', async () => {
    const secret = `postgres://slipway:hunter2@db/${crypto.randomUUID()}`;
    const err = new Error(`connect failed for ${secret}`);
    ops.fail = err;
    const before = logged.length;
    const res = await call('POST', `/api/v1/deployments/${deploymentId}/restart`);
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), { error: 'internal_error', message: 'internal error' });
    assert.ok(!res.body.includes('hunter2') && !/\bat /.test(res.body));
    assert.equal(logged.length, before + 1, 'the internal error was logged');
    assert.ok(JSON.stringify(logged.at(-1), (_k, v: unknown) => (v instanceof Error ? v.message : v)).includes('hunter2'), 'with its detail');
  });

  test('an error thrown as a non-Error value is still {error, message}', async () => {
    ops.fail = 'a string, not an Error';
    const res = await call('POST', `/api/v1/deployments/${deploymentId}/stop`);
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), { error: 'internal_error', message: 'internal error' });
  });

  test('/healthz answers 503 with the reason when a dependency is down', async () => {
    healthy = false;
    try {
      const res = await app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(res.statusCode, 503);
      assert.equal(res.json().checks.docker.ok, false);
      assert.match(res.json().checks.docker.detail, /Docker/);
    } finally {
      healthy = true;
    }
    assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  });

  test('authentication runs before anything else: no credential, no operation', async () => {
    const before = ops.calls.length;
    const res = await app.inject({ method: 'POST', url: `/api/v1/deployments/${deploymentId}/deploy` });
    assert.equal(res.statusCode, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.equal(ops.calls.length, before);
  });
});
