// API tests of managed databases in teams (decisions §18 roles) and of the mysql and redis engines, on real containers of the stand-in images.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { STAND_IN_IMAGES, databaseContainer, runIn, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

describe('managed databases: teams, mysql and redis', () => {
  let s: TestServer;
  let alice: User;
  let bob: User;

  before(async () => {
    s = await startTestServer(STAND_IN_IMAGES);
    alice = await s.newUser('alice');
    bob = await s.newUser('bob');
  });
  after(async () => {
    await s?.close();
  });

  const create = (token: string, body: Record<string, unknown>) => s.request('POST', '/api/v1/databases', { token, body });

  test('team roles: a viewer reads but gets no credentials (403), an outsider gets 404', async () => {
    const team = await s.request('POST', '/api/v1/teams', { token: alice.token, body: { name: 'data team' } });
    assert.equal(team.status, 201, team.text);
    const viewer = await s.newUser('viewer');
    const added = await s.request('POST', `/api/v1/teams/${team.json.id}/members`, { token: alice.token, body: { email: viewer.email, role: 'viewer' } });
    assert.equal(added.status, 201, added.text);
    assertError(await create(viewer.token, { name: 'nope', engine: 'redis', team_id: team.json.id }), 403, 'forbidden');
    const res = await create(alice.token, { name: 'cache', engine: 'redis', team_id: team.json.id });
    assert.equal(res.status, 201, res.text);
    const seen = await s.request('GET', `/api/v1/databases/${res.json.id}`, { token: viewer.token });
    assert.equal(seen.status, 200);
    assertError(await s.request('GET', `/api/v1/databases/${res.json.id}/credentials`, { token: viewer.token }), 403, 'forbidden');
    assertError(await s.request('GET', `/api/v1/databases/${res.json.id}`, { token: bob.token }), 404, 'not_found');
    const running = await waitForStatus(s, alice.token, res.json.id);
    assert.equal(running.status, 'running', running.error);
    const creds = await s.request('GET', `/api/v1/databases/${res.json.id}/credentials`, { token: alice.token });
    const container = await databaseContainer(res.json.id);
    const pong = await runIn(container!.Id, ['redis-cli', '-h', '127.0.0.1', 'ping'], { REDISCLI_AUTH: creds.json.password });
    assert.match(pong, /PONG/);
    assertError(await s.request('DELETE', `/api/v1/teams/${team.json.id}`, { token: alice.token }), 400, 'validation_error');
    assert.equal((await s.request('DELETE', `/api/v1/databases/${res.json.id}`, { token: alice.token })).status, 204);
  });

  test('a mysql (MariaDB) database runs and its credentials log in', async () => {
    const res = await create(alice.token, { name: 'shop', engine: 'mysql' });
    assert.equal(res.status, 201, res.text);
    const running = await waitForStatus(s, alice.token, res.json.id);
    assert.equal(running.status, 'running', running.error);
    const creds = (await s.request('GET', `/api/v1/databases/${res.json.id}/credentials`, { token: alice.token })).json;
    assert.equal(creds.url, `mysql://app:${creds.password}@shop:3306/shop`);
    const container = await databaseContainer(res.json.id);
    const out = await runIn(container!.Id, ['mariadb', '--protocol=TCP', '-h', '127.0.0.1', '-u', creds.username, '-N', '-B', '-e', 'select 6 * 7', creds.database], { MYSQL_PWD: creds.password });
    assert.equal(out.trim(), '42');
    assert.equal((await s.request('DELETE', `/api/v1/databases/${res.json.id}`, { token: alice.token })).status, 204);
  });

});
