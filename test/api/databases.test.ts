// API tests of managed databases (decisions §19) on real containers of the stand-in images: create, status, credentials, published nowhere, stop/start with the data kept, bad input, quota.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { STAND_IN_IMAGES, databaseContainer, docker, psql, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

const UNPULLABLE = '127.0.0.1:9/slipway-test/no-such-database:1';

describe('managed databases', () => {
  let s: TestServer;
  let alice: User;
  let bob: User;
  let pgId: string;

  before(async () => {
    // mysql's image is one no registry serves (a closed port on loopback): its databases fail to start.
    s = await startTestServer({ ...STAND_IN_IMAGES, SLIPWAY_DB_IMAGE_MYSQL: UNPULLABLE, SLIPWAY_QUOTA_DATABASES: '3' });
    alice = await s.newUser('alice');
    bob = await s.newUser('bob');
  });
  after(async () => {
    await s?.close();
  });

  const create = (token: string, body: Record<string, unknown>) => s.request('POST', '/api/v1/databases', { token, body });

  test('a postgres database is created, runs, and its generated credentials log in; it is published on no host port', async () => {
    const res = await create(alice.token, { name: 'Main-DB', engine: 'postgres' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json.name, 'main-db', 'folded to lower case');
    assert.equal(res.json.engine, 'postgres');
    assert.equal(res.json.image, STAND_IN_IMAGES['SLIPWAY_DB_IMAGE_POSTGRES']);
    assert.equal(res.json.status, 'creating');
    assert.equal(res.json.team_id, null);
    assert.equal(typeof res.json.size_bytes, 'number');
    pgId = res.json.id;

    const running = await waitForStatus(s, alice.token, pgId);
    assert.equal(running.status, 'running', running.error);
    assert.ok(running.size_bytes > 0, 'the data directory is measured');

    const creds = await s.request('GET', `/api/v1/databases/${pgId}/credentials`, { token: alice.token });
    assert.equal(creds.status, 200, creds.text);
    assert.match(creds.json.password, /^[A-Za-z0-9]{32}$/);
    assert.deepEqual([creds.json.host, creds.json.port], ['main-db', 5432]);
    assert.equal(creds.json.url, `postgres://${creds.json.username}:${creds.json.password}@main-db:5432/${creds.json.database}`);

    const container = await databaseContainer(pgId);
    assert.ok(container !== undefined);
    assert.equal(await psql(container.Id, creds.json, 'select 40 + 2'), '42\n');
    // Published nowhere: no port binding asked of the engine, none given.
    assert.deepEqual(container.HostConfig.PortBindings ?? {}, {});
    for (const bindings of Object.values(container.NetworkSettings.Ports ?? {})) assert.equal(bindings, null);
    // On its own internal network, and nothing else.
    const networks = Object.keys(container.NetworkSettings.Networks);
    assert.equal(networks.length, 1);
    const network = await docker.getNetwork(networks[0]!).inspect();
    assert.equal(network.Internal, true);

    // Every credentials read is an audit entry; the password is in none.
    const audit = await s.request('GET', `/api/v1/audit?target_id=${pgId}`, { token: alice.token });
    assert.ok(audit.json.some((e: { action: string }) => e.action === 'database.credentials.read'), audit.text);
    assert.ok(audit.json.some((e: { action: string }) => e.action === 'database.create'));
    assert.ok(!audit.text.includes(creds.json.password));
    // Nor in any other answer.
    const list = await s.request('GET', '/api/v1/databases', { token: alice.token });
    assert.ok(!list.text.includes(creds.json.password));

    const metrics = await s.request('GET', `/api/v1/databases/${pgId}/metrics`, { token: alice.token });
    assert.equal(metrics.status, 200, metrics.text);
    assert.ok(metrics.json.memory_bytes > 0);
    const logs = await s.request('GET', `/api/v1/databases/${pgId}/logs?tail=50`, { token: alice.token });
    assert.equal(logs.status, 200);
    assert.ok(!logs.text.includes(creds.json.password));
  });

  test('stop and start keep the data in the volume', async () => {
    const creds = (await s.request('GET', `/api/v1/databases/${pgId}/credentials`, { token: alice.token })).json;
    const first = await databaseContainer(pgId);
    await psql(first!.Id, creds, 'create table notes (body text); insert into notes values (\'kept\')');
    const stopped = await s.request('POST', `/api/v1/databases/${pgId}/stop`, { token: alice.token });
    assert.equal(stopped.status, 200, stopped.text);
    assert.equal(stopped.json.status, 'stopped');
    assertError(await s.request('GET', `/api/v1/databases/${pgId}/metrics`, { token: alice.token }), 409, 'invalid_state');
    const started = await s.request('POST', `/api/v1/databases/${pgId}/start`, { token: alice.token });
    assert.equal(started.status, 200, started.text);
    assert.equal(started.json.status, 'running');
    const second = await databaseContainer(pgId);
    assert.equal(await psql(second!.Id, creds, 'select body from notes'), 'kept\n');
  });

  test('bad input is refused and leaves nothing behind; another user sees nothing', async () => {
    const before = (await s.request('GET', '/api/v1/databases', { token: alice.token })).json.length;
    assertError(await create(alice.token, { name: '-bad-', engine: 'postgres' }), 400, 'validation_error');
    assertError(await create(alice.token, { name: 'x'.repeat(64), engine: 'postgres' }), 400, 'validation_error');
    assertError(await create(alice.token, { name: 'other', engine: 'oracle' }), 400, 'validation_error');
    assertError(await create(alice.token, { name: 'other' }), 400, 'validation_error');
    assertError(await create(alice.token, { name: 'main-db', engine: 'redis' }), 400, 'validation_error', 'a taken name');
    assertError(await create(alice.token, { name: 'other', engine: 'postgres', extra: 1 }), 400, 'validation_error');
    assertError(await create(alice.token, { name: 'other', engine: 'postgres', team_id: crypto.randomUUID() }), 404, 'not_found');
    assert.equal((await s.request('GET', '/api/v1/databases', { token: alice.token })).json.length, before);

    // Bob: the same name is his to take; Alice's database is missing for him everywhere.
    for (const [method, path] of [
      ['GET', `/api/v1/databases/${pgId}`],
      ['GET', `/api/v1/databases/${pgId}/credentials`],
      ['POST', `/api/v1/databases/${pgId}/stop`],
      ['DELETE', `/api/v1/databases/${pgId}`],
      ['GET', `/api/v1/databases/${pgId}/logs`],
      ['GET', '/api/v1/databases/not-a-uuid'],
    ] as const) {
      assertError(await s.request(method, path, { token: bob.token }), 404, 'not_found', `${method} ${path}`);
    }
    assert.deepEqual((await s.request('GET', '/api/v1/databases', { token: bob.token })).json, []);
    assertError(await s.request('GET', '/api/v1/databases?limit=0', { token: alice.token }), 400, 'validation_error');
  });

  test('an image that cannot be pulled fails the database, naming the image, the setting and the stand-in command', async () => {
    const res = await create(alice.token, { name: 'unpullable', engine: 'mysql' });
    assert.equal(res.status, 201, res.text);
    const failed = await waitForStatus(s, alice.token, res.json.id);
    assert.equal(failed.status, 'failed');
    assert.ok(failed.error.includes(UNPULLABLE), failed.error);
    assert.match(failed.error, /SLIPWAY_DB_IMAGE_MYSQL/);
    assert.match(failed.error, /npm run stand-in-images/);
    assert.equal(await databaseContainer(res.json.id), undefined, 'no container was made');
    assert.equal((await s.request('DELETE', `/api/v1/databases/${res.json.id}`, { token: alice.token })).status, 204);
  });

  test('the per-user quota: the next database is 429 and nothing is made', async () => {
    const user = await s.newUser('quota');
    const made: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const res = await create(user.token, { name: `q${i}`, engine: 'redis' });
      assert.equal(res.status, 201, res.text);
      made.push(res.json.id);
    }
    assertError(await create(user.token, { name: 'q3', engine: 'redis' }), 429, 'quota_exceeded');
    const quotas = await s.request('GET', '/api/v1/users/me/quotas', { token: user.token });
    assert.deepEqual(quotas.json.quotas.databases, { limit: 3, used: 3, overridden: false });
    // Pages of the list (decisions §14).
    const page = await s.request('GET', '/api/v1/databases?limit=2', { token: user.token });
    assert.equal(page.json.length, 2);
    assert.match(page.headers.get('link') ?? '', /rel="next"/);
    // Deleted while still being created: the start is aborted and nothing of it stays.
    for (const id of made) assert.equal((await s.request('DELETE', `/api/v1/databases/${id}`, { token: user.token })).status, 204);
    for (const id of made) assert.equal(await databaseContainer(id), undefined);
    assert.equal((await s.request('GET', '/api/v1/users/me/quotas', { token: user.token })).json.quotas.databases.used, 0);
  });

});
