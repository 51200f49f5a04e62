// GET /api/v1/instances (decisions §15): administrators see the instances sharing the database.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, assertUnauthorized } from '../helpers/api-assert.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('GET /api/v1/instances', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ SLIPWAY_INSTANCE_URL: 'http://127.0.0.1:9/' });
  });
  after(async () => {
    await s.close();
  });

  test('lists this instance: live, the leader, its URL and version', async () => {
    const res = await s.request('GET', '/api/v1/instances', { token: s.adminToken });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.length, 1);
    const [me] = res.json;
    assert.deepEqual(Object.keys(me).sort(), ['builds_running', 'id', 'last_seen_at', 'leader', 'started_at', 'state', 'url', 'version']);
    assert.equal(me.state, 'live');
    assert.equal(me.leader, true);
    assert.equal(me.url, 'http://127.0.0.1:9');
    assert.equal(me.builds_running, 0);
    assert.match(me.version, /^\d+\.\d+\.\d+/);
    assert.ok(Date.parse(me.last_seen_at) >= Date.parse(me.started_at));
  });

  test('is for administrators only', async () => {
    const user = await s.newUser('instances');
    assertError(await s.request('GET', '/api/v1/instances', { token: user.token }), 403, 'forbidden');
    assertUnauthorized(await s.request('GET', '/api/v1/instances'));
  });
});
