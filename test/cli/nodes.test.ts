// GET /api/v1/nodes, drain and activate under the docker runtime (one node), and `slipway nodes` / `slipway scale`.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertError, assertUnauthorized } from '../helpers/api-assert.js';
import { cli } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('nodes and scale', () => {
  let server: TestServer;
  let home: string;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  const run = (args: string[], bearer: string) => cli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: bearer } });

  before(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'slipway-nodes-cli-'));
    server = await startTestServer({ SLIPWAY_DATA_PLANE: 'node' });
    user = await server.newUser('nodes');
  });
  after(async () => {
    await server.close();
    await rm(home, { recursive: true, force: true });
  });

  test('the docker runtime has one node, this engine: listed for administrators only; it can be neither drained nor activated', async () => {
    const list = await server.request('GET', '/api/v1/nodes', { token: server.adminToken });
    assert.equal(list.status, 200, list.text);
    assert.equal(list.json.length, 1);
    const [node] = list.json;
    assert.deepEqual(Object.keys(node).sort(), ['address', 'availability', 'hostname', 'id', 'replicas', 'role', 'state']);
    assert.equal(node.role, 'manager');
    assert.equal(node.availability, 'active');
    assert.equal(node.state, 'ready');
    assert.ok(Number.isInteger(node.replicas) && node.replicas >= 0);

    assertError(await server.request('GET', '/api/v1/nodes', { token: user.token }), 403, 'forbidden', 'not an admin');
    assertUnauthorized(await server.request('GET', '/api/v1/nodes'), 'no bearer');
    assertError(await server.request('POST', `/api/v1/nodes/${node.id}/drain`, { token: user.token }), 403, 'forbidden', 'drain, not an admin');
    assertError(await server.request('POST', `/api/v1/nodes/${node.id}/drain`, { token: server.adminToken }), 409, 'invalid_state', 'drain the only node');
    assertError(await server.request('POST', `/api/v1/nodes/${node.id}/activate`, { token: server.adminToken }), 409, 'invalid_state', 'activate');
    assertError(await server.request('POST', '/api/v1/nodes/nope/drain', { token: server.adminToken }), 404, 'not_found', 'unknown node');

    const shown = await run(['nodes'], server.adminToken);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /AVAILABILITY/);
    assert.match(shown.stdout, new RegExp(`${node.id}\\s+\\S+\\s+127\\.0\\.0\\.1\\s+manager\\s+active\\s+ready`));
    const refused = await run(['nodes', 'drain', node.id], server.adminToken);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /one engine/);
  });

  test('slipway scale records the replicas (applied at the next release) and refuses what the API refuses', async () => {
    const sub = `scale-${process.pid}`;
    const created = await server.request('POST', '/api/v1/deployments', { token: user.token, body: { name: sub, subdomain: sub, source_type: 'archive' } });
    assert.equal(created.status, 201, created.text);
    const scaled = await run(['scale', sub, '3'], user.apiKey);
    assert.equal(scaled.code, 0, scaled.stderr);
    assert.match(scaled.stdout, /will run 3 replicas from its next deploy/);
    assert.equal((await server.request('GET', `/api/v1/deployments/${created.json.id}`, { token: user.token })).json.replicas, 3);
    const tooMany = await run(['scale', sub, '21'], user.apiKey);
    assert.notEqual(tooMany.code, 0);
    assert.match(tooMany.stderr, /1 to 20/);

    const withVolume = await server.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: `${sub}-v`, subdomain: `${sub}-v`, source_type: 'archive', volumes: [{ name: 'data', mount_path: '/data' }] },
    });
    const refused = await run(['scale', `${sub}-v`, '2'], user.apiKey);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /volumes/);
    assert.equal((await server.request('GET', `/api/v1/deployments/${withVolume.json.id}`, { token: user.token })).json.replicas, 1);
  });
});
