// Backup destinations through the API (decisions §20) against a real S3-protocol server on loopback: CRUD without the secret, ownership, and the test naming the failing step.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { assertError, assertNoLeak } from '../helpers/api-assert.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('backup destinations', () => {
  let s: TestServer;
  let s3: TestS3;
  let alice: User;
  let bob: User;

  before(async () => {
    s3 = await startS3();
    // Databases here never run (an image no registry serves): enough for the checks made before a dump.
    s = await startTestServer({ SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true', SLIPWAY_DB_IMAGE_POSTGRES: '127.0.0.1:9/slipway-test/no-such-database:1' });
    alice = await s.newUser('alice');
    bob = await s.newUser('bob');
  });
  after(async () => {
    await s?.close();
    await s3?.close();
  });

  const s3Body = (overrides: Record<string, unknown> = {}) => ({
    name: 'offsite',
    type: 's3',
    endpoint: s3.endpoint,
    region: 'us-east-1',
    bucket: s3.bucket,
    prefix: 'slipway',
    access_key_id: S3_ACCESS_KEY,
    secret_access_key: S3_SECRET_KEY,
    force_path_style: true,
    ...overrides,
  });

  test('create, read, list, change and delete an S3 destination: the secret is never returned; another user gets 404', async () => {
    const created = await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body() });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.type, 's3');
    assert.equal(created.json.prefix, 'slipway/');
    assert.equal(created.json.secret_access_key, undefined);
    const id = created.json.id as string;
    const secret = 'a-secret-never-shown-0123456789';
    const changed = await s.request('PATCH', `/api/v1/backup-destinations/${id}`, { token: alice.token, body: { name: 'offsite-2', secret_access_key: secret } });
    assert.equal(changed.status, 200, changed.text);
    assert.equal(changed.json.name, 'offsite-2');
    for (const res of [changed, await s.request('GET', `/api/v1/backup-destinations/${id}`, { token: alice.token }), await s.request('GET', '/api/v1/backup-destinations', { token: alice.token })]) {
      assertNoLeak(res, [secret, S3_SECRET_KEY === 'S3RVER' ? secret : S3_SECRET_KEY]);
    }
    const list = await s.request('GET', '/api/v1/backup-destinations', { token: alice.token });
    assert.deepEqual(list.json.map((d: { id: string }) => d.id), [id]);
    assert.deepEqual((await s.request('GET', '/api/v1/backup-destinations', { token: bob.token })).json, []);
    for (const [method, path] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', '/test']] as const) {
      assertError(await s.request(method, `/api/v1/backup-destinations/${id}${path}`, { token: bob.token, ...(method === 'PATCH' ? { body: { name: 'x' } } : {}) }), 404, 'not_found', `${method} ${path} by another user`);
    }
    assertError(await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body({ name: 'offsite-2' }) }), 400, 'validation_error', 'a name taken');
    assertError(await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body({ name: 'x1', endpoint: 'ftp://example.com' }) }), 400, 'validation_error');
    assertError(await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body({ name: 'x2', secret_access_key: undefined }) }), 400, 'validation_error');
    assert.equal((await s.request('DELETE', `/api/v1/backup-destinations/${id}`, { token: alice.token })).status, 204);
    assertError(await s.request('GET', `/api/v1/backup-destinations/${id}`, { token: alice.token }), 404, 'not_found');
  });

  test('a name is any text of 1 to 100 characters after trimming, case kept (contract §20 gives no rule); unique per owner; empty, too long or with control characters is a 400', async () => {
    const created = await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: { name: '  Offsite S3 ', type: 'local' } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.name, 'Offsite S3');
    assert.equal((await s.request('GET', `/api/v1/backup-destinations/${created.json.id}`, { token: alice.token })).json.name, 'Offsite S3');
    const renamed = await s.request('PATCH', `/api/v1/backup-destinations/${created.json.id}`, { token: alice.token, body: { name: 'Offsite' } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.json.name, 'Offsite', 'not lower-cased');
    assertError(await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: { name: 'Offsite', type: 'local' } }), 400, 'validation_error', 'a name taken');
    const other = await s.request('POST', '/api/v1/backup-destinations', { token: bob.token, body: { name: 'Offsite', type: 'local' } });
    assert.equal(other.status, 201, 'another owner may have the same name');
    const long = await s.request('POST', '/api/v1/backup-destinations', { token: bob.token, body: { name: `  ${'é'.repeat(100)}  `, type: 'local' } });
    assert.equal(long.status, 201, '100 characters once trimmed');
    assert.equal(long.json.name, 'é'.repeat(100));
    for (const bad of ['', '   ', 'x'.repeat(101), 'two\nlines', 'nul\u0000', 7]) {
      const res = await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: { name: bad, type: 'local' } });
      assertError(res, 400, 'validation_error', JSON.stringify(bad));
      assert.match(res.json.message, /^name/, JSON.stringify(bad));
    }
    assertError(await s.request('PATCH', `/api/v1/backup-destinations/${created.json.id}`, { token: alice.token, body: { name: 'tab\there' } }), 400, 'validation_error');
    for (const [token, id] of [[alice.token, created.json.id], [bob.token, other.json.id], [bob.token, long.json.id]] as const) {
      assert.equal((await s.request('DELETE', `/api/v1/backup-destinations/${id}`, { token })).status, 204);
    }
  });

  test('test: ok against s3rver (nothing left behind); wrong credentials fail at auth; an unreachable endpoint fails at resolve within 30 s', async () => {
    const good = (await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body({ name: 'good' }) })).json;
    const ok = await s.request('POST', `/api/v1/backup-destinations/${good.id}/test`, { token: alice.token });
    assert.deepEqual(ok.json, { ok: true });
    assert.deepEqual(await s3.objectFiles(), [], 'the probe object was deleted');

    // s3rver checks the access key id (it does not compute v4 signatures): a wrong key id is the wrong credentials.
    const wrong = (await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body({ name: 'wrong', access_key_id: 'NOT-A-KEY', secret_access_key: 'not-the-secret' }) })).json;
    const denied = await s.request('POST', `/api/v1/backup-destinations/${wrong.id}/test`, { token: alice.token });
    assert.equal(denied.json.ok, false);
    assert.equal(denied.json.step, 'auth', denied.text);
    assertNoLeak(denied, ['not-the-secret']);

    const port = await closedPort();
    const gone = (await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body({ name: 'gone', endpoint: `http://127.0.0.1:${port}` }) })).json;
    const started = Date.now();
    const unreachable = await s.request('POST', `/api/v1/backup-destinations/${gone.id}/test`, { token: alice.token });
    assert.equal(unreachable.json.ok, false);
    assert.equal(unreachable.json.step, 'resolve', unreachable.text);
    assert.match(unreachable.json.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
    assert.ok(Date.now() - started < 30_000);

    // A host that does not resolve: with SLIPWAY_ALLOW_PRIVATE_TARGETS there is nothing to refuse at
    // creation (or at a change); the test resolves it and names the step.
    const nowhere = await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: s3Body({ name: 'nowhere', endpoint: 'https://no-such-host.invalid' }) });
    assert.equal(nowhere.status, 201, nowhere.text);
    const unresolved = await s.request('POST', `/api/v1/backup-destinations/${nowhere.json.id}/test`, { token: alice.token });
    assert.equal(unresolved.status, 200);
    assert.equal(unresolved.json.ok, false);
    assert.equal(unresolved.json.step, 'resolve', unresolved.text);
    assert.match(unresolved.json.message, /no-such-host\.invalid does not resolve/);
    const moved = await s.request('PATCH', `/api/v1/backup-destinations/${good.id}`, { token: alice.token, body: { endpoint: 'http://also-no-such-host.invalid:9000' } });
    assert.equal(moved.status, 200, moved.text);
    assert.equal(moved.json.endpoint, 'http://also-no-such-host.invalid:9000');
  });

  test('a local destination under the data directory tests ok', async () => {
    const local = await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: { name: 'here', type: 'local' } });
    assert.equal(local.status, 201, local.text);
    assert.deepEqual(Object.keys(local.json).sort(), ['created_at', 'id', 'name', 'team_id', 'type', 'updated_at']);
    assert.deepEqual((await s.request('POST', `/api/v1/backup-destinations/${local.json.id}/test`, { token: alice.token })).json, { ok: true });
  });

  test("a destination a database's schedule uses is not deleted (409 naming the database); a backup taken now needs no body", async () => {
    const dest = (await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: { name: 'scheduled', type: 'local' } })).json;
    const db = await s.request('POST', '/api/v1/databases', { token: alice.token, body: { name: 'orders', engine: 'postgres' } });
    assert.equal(db.status, 201, db.text);
    // No body and no schedule: the request is read as `{}` and names what is missing.
    const unnamed = await s.request('POST', `/api/v1/databases/${db.json.id}/backups`, { token: alice.token });
    assertError(unnamed, 400, 'validation_error');
    assert.match(unnamed.json.message, /destination_id/);
    const scheduled = await s.request('PATCH', `/api/v1/databases/${db.json.id}`, { token: alice.token, body: { backup: { schedule: '0 3 * * *', destination_id: dest.id, keep: 3 } } });
    assert.equal(scheduled.status, 200, scheduled.text);
    assert.deepEqual(scheduled.json.backup, { schedule: '0 3 * * *', destination_id: dest.id, keep: 3, pitr: false });
    const used = await s.request('DELETE', `/api/v1/backup-destinations/${dest.id}`, { token: alice.token });
    assertError(used, 409, 'invalid_state');
    assert.match(used.json.message, /orders/);
    // No body, the schedule's destination: taken now but for the database's state (it never runs here), not refused for its body.
    assertError(await s.request('POST', `/api/v1/databases/${db.json.id}/backups`, { token: alice.token }), 409, 'invalid_state');
    assert.equal((await s.request('DELETE', `/api/v1/databases/${db.json.id}`, { token: alice.token })).status, 204);
    assert.equal((await s.request('DELETE', `/api/v1/backup-destinations/${dest.id}`, { token: alice.token })).status, 204);
  });
});
