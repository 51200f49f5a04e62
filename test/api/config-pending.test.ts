// Configuration pending on the server (issue 33 item 2): a change of variables or of release settings is recorded on the deployment with its keys until the next release, in every view of it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('config_pending', () => {
  let ts: TestServer;
  let token: string;
  let app: { id: string; subdomain: string };

  const view = async (): Promise<{ config_pending: boolean; config_pending_keys: string[]; status: string }> =>
    (await ts.request('GET', `/api/v1/deployments/${app.id}`, { token })).json;
  const listed = async (): Promise<{ config_pending: boolean; config_pending_keys: string[] } | undefined> =>
    ((await ts.request('GET', '/api/v1/deployments', { token })).json as Array<{ id: string; config_pending: boolean; config_pending_keys: string[] }>).find((d) => d.id === app.id);

  before(async () => {
    ts = await startTestServer();
    token = (await ts.newUser('pending')).token;
    app = await createArchiveApp(ts, token, (await busyboxArchive()).archive);
  });
  after(async () => {
    await ts.close();
  });

  test('an app never released has nothing pending: its first release takes the configuration as it is', async () => {
    const patched = await ts.request('PATCH', `/api/v1/deployments/${app.id}/env`, { token, body: { vars: { EARLY: '1' } } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual([(await view()).config_pending, (await view()).config_pending_keys], [false, []]);
  });

  test('variables and release settings changed after the release are pending, with their keys, in the deployment and the list; a restart clears them', async () => {
    assert.equal((await deployAndWait(ts, token, app.id)).status, 200);
    assert.deepEqual([(await view()).config_pending, (await view()).config_pending_keys], [false, []]);

    assert.equal((await ts.request('PATCH', `/api/v1/deployments/${app.id}/env`, { token, body: { vars: { LOG_LEVEL: 'debug', EARLY: null } } })).status, 200);
    assert.deepEqual([(await view()).config_pending, (await view()).config_pending_keys], [true, ['EARLY', 'LOG_LEVEL']]);
    // Settings a restart applies are pending; a name, which changes nothing in the app, is not.
    const patched = await ts.request('PATCH', `/api/v1/deployments/${app.id}`, { token, body: { memory_mb: 128, name: 'renamed' } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(patched.json.config_pending_keys, ['EARLY', 'LOG_LEVEL', 'memory_mb']);
    const inList = await listed();
    assert.deepEqual([inList?.config_pending, inList?.config_pending_keys], [true, ['EARLY', 'LOG_LEVEL', 'memory_mb']], 'the list is not served from a stale page');

    const restarted = await ts.request('POST', `/api/v1/deployments/${app.id}/restart`, { token });
    assert.equal(restarted.status, 200, restarted.text);
    assert.deepEqual([(await view()).config_pending, (await view()).config_pending_keys], [false, []]);
    assert.deepEqual((await listed())?.config_pending_keys, []);
  });

  test('a refused change marks nothing', async () => {
    const refused = await ts.request('PATCH', `/api/v1/deployments/${app.id}/env`, { token, body: { vars: { 'NOT VALID': 'x' } } });
    assert.equal(refused.status, 400, refused.text);
    assert.equal((await view()).config_pending, false);
  });

  test('the OpenAPI document describes config_pending, config_pending_keys and health', async () => {
    const doc = (await ts.request('GET', '/api/v1/openapi.json')).json;
    const schema = doc.components.schemas.Deployment;
    assert.equal(schema.properties.config_pending.type, 'boolean');
    assert.equal(schema.properties.config_pending_keys.type, 'array');
    assert.deepEqual(Object.keys(schema.properties.health.properties).sort(), ['last_exit_code', 'last_line', 'restarts', 'since', 'state']);
  });
});
