// API tests: API keys — format, shown once, listing, bearer use everywhere, last_used_at, revocation.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, assertNoLeak, assertUnauthorized } from '../helpers/api-assert.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KEY_FORMAT = /^slw_k1_[0-9A-Za-z]{32,}$/;

describe('API keys', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s.close();
  });

  test('create answers 201 {api_key, key}; the key has the documented format and prefix', async () => {
    const user = await s.newUser('keys');
    const res = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: '  laptop  ' } });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(Object.keys(res.json).sort(), ['api_key', 'key']);
    const { key, api_key: record } = res.json;
    assert.match(key, KEY_FORMAT);
    assert.ok(key.length - 'slw_k1_'.length >= 32);
    assert.deepEqual(Object.keys(record).sort(), ['created_at', 'id', 'key_prefix', 'last_used_at', 'name']);
    assert.match(record.id, /^[0-9a-f-]{36}$/);
    assert.equal(record.name, 'laptop', 'the name is trimmed');
    assert.equal(record.key_prefix, key.slice(0, 12));
    assert.equal(record.last_used_at, null);
    assert.ok(Math.abs(Date.parse(record.created_at) - Date.now()) < 60_000);
    // Two keys never collide.
    const again = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'laptop' } });
    assert.notEqual(again.json.key, key);
  });

  test('bad create bodies are 400 validation_error and create nothing', async () => {
    const user = await s.newUser('keysbad');
    for (const [what, body] of [
      ['empty name', { name: '' }],
      ['blank name', { name: '   ' }],
      ['long name', { name: 'x'.repeat(101) }],
      ['no name', {}],
      ['number', { name: 42 }],
      ['unknown field', { name: 'ok', scope: 'all' }],
    ] as const) {
      assertError(await s.request('POST', '/api/v1/api-keys', { token: user.token, body }), 400, 'validation_error', what);
    }
    const list = await s.request('GET', '/api/v1/api-keys', { token: user.token });
    assert.equal(list.json.length, 1, 'only the key newUser() made');
  });

  test('the list never shows the key, only records', async () => {
    const user = await s.newUser('keyslist');
    const created = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'second' } });
    const list = await s.request('GET', '/api/v1/api-keys', { token: user.apiKey });
    assert.equal(list.status, 200);
    assert.equal(list.json.length, 2);
    for (const record of list.json) {
      assert.deepEqual(Object.keys(record).sort(), ['created_at', 'id', 'key_prefix', 'last_used_at', 'name']);
    }
    assert.deepEqual(list.json.map((k: { id: string }) => k.id).sort(), [created.json.api_key.id, list.json.find((k: { name: string }) => k.name === 'test').id].sort());
    assertNoLeak(list, [created.json.key, user.apiKey, created.json.key.slice(12), user.apiKey.slice(12)]);
  });

  test('a key works as the bearer on every endpoint', async () => {
    const user = await s.newUser('keysbearer');
    const k = user.apiKey;
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: k })).status, 200);
    assert.equal((await s.request('GET', '/api/v1/api-keys', { token: k })).status, 200);
    const other = await s.request('POST', '/api/v1/api-keys', { token: k, body: { name: 'made with a key' } });
    assert.equal(other.status, 201);
    assert.equal((await s.request('DELETE', `/api/v1/api-keys/${other.json.api_key.id}`, { token: k })).status, 204);
    const dep = await s.request('POST', '/api/v1/deployments', { token: k, body: { name: 'k', subdomain: `keybearer-${process.pid}`, source_type: 'archive' } });
    assert.equal(dep.status, 201, dep.text);
    assert.equal((await s.request('GET', '/api/v1/deployments', { token: k })).status, 200);
    assert.equal((await s.request('GET', `/api/v1/deployments/${dep.json.id}`, { token: k })).status, 200);
    assert.equal((await s.request('GET', `/api/v1/deployments/${dep.json.id}/builds`, { token: k })).status, 200);
    assertError(await s.request('POST', `/api/v1/deployments/${dep.json.id}/deploy`, { token: k }), 409, 'invalid_state');
    assert.equal((await s.request('GET', '/api/v1/tunnels', { token: k })).status, 200);
    assert.equal((await s.request('DELETE', `/api/v1/deployments/${dep.json.id}`, { token: k })).status, 204);
    // Logging out with a key ends no session and the key keeps working.
    assert.equal((await s.request('POST', '/api/v1/auth/logout', { token: k })).status, 204);
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: k })).status, 200);
  });

  test('last_used_at is null until the key is used, then set on each use', async () => {
    const user = await s.newUser('keysused');
    const created = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'tracked' } });
    const id = created.json.api_key.id as string;
    const find = async (): Promise<{ last_used_at: string | null }> => {
      const list = await s.request('GET', '/api/v1/api-keys', { token: user.token });
      return list.json.find((r: { id: string }) => r.id === id);
    };
    assert.equal((await find()).last_used_at, null, 'a session request does not touch the key');
    const t0 = Date.now();
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: created.json.key })).status, 200);
    const first = (await find()).last_used_at;
    assert.ok(first !== null);
    assert.ok(Date.parse(first) >= t0 - 1000 && Date.parse(first) <= Date.now() + 1000, first);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal((await s.request('GET', '/api/v1/deployments', { token: created.json.key })).status, 200);
    const second = (await find()).last_used_at;
    assert.ok(second !== null && Date.parse(second) > Date.parse(first), `${first} then ${second}`);
  });

  test('DELETE answers 204, then the key is 401 and gone from the list', async () => {
    const user = await s.newUser('keysdel');
    const created = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'doomed' } });
    assert.equal((await s.request('GET', '/api/v1/users/me', { token: created.json.key })).status, 200);
    const res = await s.request('DELETE', `/api/v1/api-keys/${created.json.api_key.id}`, { token: user.token });
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    assertUnauthorized(await s.request('GET', '/api/v1/users/me', { token: created.json.key }), 'revoked key');
    const list = await s.request('GET', '/api/v1/api-keys', { token: user.token });
    assert.ok(!list.json.some((r: { id: string }) => r.id === created.json.api_key.id));
    assertError(await s.request('DELETE', `/api/v1/api-keys/${created.json.api_key.id}`, { token: user.token }), 404, 'not_found', 'twice');
  });

  test('a key can revoke itself', async () => {
    const user = await s.newUser('keysself');
    const list = await s.request('GET', '/api/v1/api-keys', { token: user.token });
    const id = list.json[0].id as string;
    assert.equal((await s.request('DELETE', `/api/v1/api-keys/${id}`, { token: user.apiKey })).status, 204);
    assertUnauthorized(await s.request('GET', '/api/v1/users/me', { token: user.apiKey }));
  });

  test('an unknown or non-UUID id is 404 not_found naming the API key', async () => {
    const user = await s.newUser('keys404');
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', '1', '00000000-0000-4000-8000-00000000000g']) {
      const res = await s.request('DELETE', `/api/v1/api-keys/${id}`, { token: user.token });
      assertError(res, 404, 'not_found', id);
      assert.match(res.json.message, /API key/i);
    }
    const list = await s.request('GET', '/api/v1/api-keys', { token: user.token });
    assert.equal(list.json.length, 1);
  });
});
