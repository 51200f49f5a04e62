// End-to-end test of `slipway db` (create, ls, info, credentials, link, unlink, stop, start, rm) against a real server and the redis stand-in.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cli } from '../helpers/cli.js';
import { STAND_IN_IMAGES } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('slipway db', () => {
  let server: TestServer;
  let home: string;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  const run = (args: string[]) => cli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey } });

  before(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'slipway-db-cli-'));
    server = await startTestServer(STAND_IN_IMAGES);
    user = await server.newUser('dbcli');
  });
  after(async () => {
    await server.close();
    await rm(home, { recursive: true, force: true });
  });

  test('a database from creation to deletion, linked to an app on the way', async () => {
    const created = await run(['db', 'create', 'cache', '--engine', 'redis']);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /Database cache is running/);
    const taken = await run(['db', 'create', 'cache', '--engine', 'redis']);
    assert.notEqual(taken.code, 0);
    assert.match(taken.stderr, /already exists/);

    const list = await run(['db', 'ls']);
    assert.match(list.stdout, /cache\s+redis\s+running/);
    const url = await run(['db', 'credentials', 'cache', '--url']);
    assert.equal(url.code, 0, url.stderr);
    assert.match(url.stdout, /^redis:\/\/default:[A-Za-z0-9]{32}@cache:6379\/0\n$/);

    const app = await server.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'web', subdomain: `web-${process.pid}`, source_type: 'archive' } });
    assert.equal(app.status, 201, app.text);
    const linked = await run(['db', 'link', 'cache', '--app', 'web', '--env', 'REDIS_URL']);
    assert.equal(linked.code, 0, linked.stderr);
    assert.match(linked.stdout, /Linked cache to web as REDIS_URL/);
    const info = JSON.parse((await run(['db', 'info', 'cache', '--json'])).stdout);
    assert.deepEqual(info.links, [{ name: 'web', env: 'REDIS_URL' }]);
    assert.equal((await run(['db', 'unlink', 'cache', '--app', 'web'])).code, 0);
    assert.deepEqual(JSON.parse((await run(['db', 'info', 'cache', '--json'])).stdout).links, []);
    assert.equal((await run(['db', 'link', 'cache', '--app', 'web', '--env', 'REDIS_URL'])).code, 0);

    const stopped = await run(['db', 'stop', 'cache']);
    assert.match(stopped.stdout, /stopped/);
    const started = await run(['db', 'start', 'cache']);
    assert.match(started.stdout, /is running/);
    // Linked: deleted all the same (contract §19), its link with it.
    const removed = await run(['db', 'rm', 'cache', '--yes']);
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual((await server.request('GET', `/api/v1/deployments/${app.json.id}/databases`, { token: user.token })).json, []);
    assert.match((await run(['db', 'ls'])).stdout, /No databases/);
    const missing = await run(['db', 'info', 'cache']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /no database "cache"/);
  });
});
