// API tests of per-user quotas (issue 23 item 5) as the attacks: one user filling deployments, API keys and upload storage; defaults from SLIPWAY_QUOTA_*, overrides an admin sets.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { upload } from '../helpers/apps.js';
import { assertError } from '../helpers/api-assert.js';
import { makeTarGz } from '../helpers/tar-fixtures.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

/** A tar.gz of about `bytes` bytes (random content does not compress). */
const archiveOf = (bytes: number): Buffer =>
  makeTarGz([
    { path: 'Dockerfile', content: 'FROM scratch\n' },
    { path: 'noise.bin', content: crypto.randomBytes(bytes) },
  ]);

describe('per-user quotas', () => {
  let s: TestServer;
  let counter = 0;

  before(async () => {
    s = await startTestServer({
      SLIPWAY_QUOTA_DEPLOYMENTS: '2',
      SLIPWAY_QUOTA_API_KEYS: '3',
      SLIPWAY_QUOTA_UPLOAD_BYTES: String(64 * 1024),
      SLIPWAY_QUOTA_CONCURRENT_BUILDS: '4',
    });
  });
  after(async () => {
    await s.close();
  });

  const create = (token: string, extra: Record<string, unknown> = {}): Promise<HttpResult> => {
    counter += 1;
    const subdomain = `quota-${process.pid}-${counter}`;
    return s.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', ...extra } });
  };
  const quotasOf = async (token: string): Promise<Record<string, { limit: number; used: number; overridden: boolean }>> => {
    const res = await s.request('GET', '/api/v1/users/me/quotas', { token });
    assert.equal(res.status, 200, res.text);
    return res.json.quotas;
  };
  const count = async (token: string, path: string): Promise<number> => ((await s.request('GET', path, { token })).json as unknown[]).length;

  test('deployments: the default applies, one more → 429 quota_exceeded naming the quota, nothing created; an admin is not limited', async () => {
    const user = await s.newUser('quota-deployments');
    assert.deepEqual((await quotasOf(user.token)).deployments, { limit: 2, used: 0, overridden: false });
    assert.equal((await create(user.token)).status, 201);
    assert.equal((await create(user.token)).status, 201);
    const over = await create(user.token);
    assertError(over, 429, 'quota_exceeded');
    assert.match(over.json.message, /deployments \(2 of 2/);
    assert.equal(await count(user.token, '/api/v1/deployments'), 2);
    assert.deepEqual((await quotasOf(user.token)).deployments, { limit: 2, used: 2, overridden: false });
    // Deleting one makes room again.
    const [first] = (await s.request('GET', '/api/v1/deployments', { token: user.token })).json as Array<{ id: string }>;
    assert.equal((await s.request('DELETE', `/api/v1/deployments/${first?.id}`, { token: user.token })).status, 204);
    assert.equal((await create(user.token)).status, 201);

    for (let i = 0; i < 3; i += 1) assert.equal((await create(s.adminToken)).status, 201, 'administrators have no quotas');
  });

  test('an admin sets and clears a user’s own quotas; non-admins, unknown users and bad values change nothing', async () => {
    const user = await s.newUser('quota-override');
    const other = await s.newUser('quota-other');
    const path = `/api/v1/users/${user.userId}/quotas`;
    const set = await s.request('PATCH', path, { token: s.adminToken, body: { deployments: 3, api_keys: 0 } });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual(set.json.quotas.deployments, { limit: 3, used: 0, overridden: true });
    assert.deepEqual(set.json.quotas.api_keys, { limit: 0, used: 1, overridden: true });
    assert.deepEqual(set.json.quotas.upload_bytes, { limit: 64 * 1024, used: 0, overridden: false });
    assert.deepEqual((await s.request('GET', path, { token: s.adminToken })).json, set.json);
    for (let i = 0; i < 3; i += 1) assert.equal((await create(user.token)).status, 201);
    assertError(await create(user.token), 429, 'quota_exceeded');
    const noKey = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'more' } });
    assertError(noKey, 429, 'quota_exceeded');
    assert.match(noKey.json.message, /api_keys/);
    // The other user still has the defaults.
    assert.equal((await quotasOf(other.token)).deployments?.limit, 2);

    assertError(await s.request('PATCH', path, { token: user.token, body: { deployments: 100 } }), 403, 'forbidden');
    assertError(await s.request('GET', path, { token: other.token }), 403, 'forbidden');
    assertError(await s.request('PATCH', `/api/v1/users/${crypto.randomUUID()}/quotas`, { token: s.adminToken, body: { deployments: 1 } }), 404, 'not_found');
    assertError(await s.request('GET', '/api/v1/users/not-a-uuid/quotas', { token: s.adminToken }), 404, 'not_found');
    for (const body of [{ deployments: -1 }, { deployments: 1.5 }, { deployments: 'many' }, { disk: 5 }, {}, { deployments: 5, disk: 5 }, [1]]) {
      assertError(await s.request('PATCH', path, { token: s.adminToken, body }), 400, 'validation_error', JSON.stringify(body));
    }
    assert.equal((await quotasOf(user.token)).deployments?.limit, 3, 'a refused change changed nothing');

    const cleared = await s.request('PATCH', path, { token: s.adminToken, body: { deployments: null, api_keys: null } });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual(cleared.json.quotas.deployments, { limit: 2, used: 3, overridden: false });
    assertError(await create(user.token), 429, 'quota_exceeded');
    assert.equal((await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'again' } })).status, 201);
  });

  test('API keys: the fourth key → 429 naming api_keys; revoking one makes room', async () => {
    const user = await s.newUser('quota-keys'); // holds one key already
    const ids: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      const res = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: `k${i}` } });
      assert.equal(res.status, 201, res.text);
      ids.push(res.json.api_key.id);
    }
    const over = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'k3' } });
    assertError(over, 429, 'quota_exceeded');
    assert.match(over.json.message, /api_keys \(3 of 3/);
    assert.equal(await count(user.token, '/api/v1/api-keys'), 3);
    assert.equal((await s.request('DELETE', `/api/v1/api-keys/${ids[0]}`, { token: user.token })).status, 204);
    assert.equal((await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'k4' } })).status, 201);
  });

  test('stored upload bytes: an upload that would pass the quota → 429 and the previous upload stays; replacing an upload counts only the new one', async () => {
    const user = await s.newUser('quota-uploads');
    const a = (await create(user.token)).json.id as string;
    const b = (await create(user.token)).json.id as string;
    const big = archiveOf(40 * 1024);
    const first = await upload(s, user.token, a, big);
    assert.equal(first.status, 200, first.text);
    assert.equal((await quotasOf(user.token)).upload_bytes?.used, first.json.size);

    const over = await upload(s, user.token, b, archiveOf(40 * 1024));
    assertError(over, 429, 'quota_exceeded');
    assert.match(over.json.message, /upload_bytes/);
    assert.equal((await s.request('GET', `/api/v1/deployments/${b}`, { token: user.token })).json.status, 'pending', 'nothing was stored');

    // A's own upload is replaced, so it may use the whole quota.
    const replaced = await upload(s, user.token, a, archiveOf(50 * 1024));
    assert.equal(replaced.status, 200, replaced.text);
    assert.equal((await quotasOf(user.token)).upload_bytes?.used, replaced.json.size);
    const small = await upload(s, user.token, b, archiveOf(2 * 1024));
    assert.equal(small.status, 200, small.text);
    // Over the room left: refused while it streams in.
    const tooMuch = await upload(s, user.token, b, archiveOf(64 * 1024));
    assertError(tooMuch, 429, 'quota_exceeded');
  });
});
