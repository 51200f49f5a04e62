// End-to-end test of database links and isolation (decisions §19): a linked app gets the URL from its next release and connects by host name; another tenant's app reaches the database neither by name nor by address; unlink cuts access at once; a linked database is deleted only with force.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { busyboxArchive, busyboxScriptArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { STAND_IN_IMAGES, appContainers, canConnect, databaseContainer, docker, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

describe('database links and isolation', () => {
  let s: TestServer;
  let alice: User;
  let bob: User;
  let pgId: string;

  before(async () => {
    s = await startTestServer(STAND_IN_IMAGES);
    alice = await s.newUser('alice');
    bob = await s.newUser('bob');
    const res = await s.request('POST', '/api/v1/databases', { token: alice.token, body: { name: 'main-db', engine: 'postgres' } });
    assert.equal(res.status, 201, res.text);
    pgId = res.json.id;
  });
  after(async () => {
    await s?.close();
  });

  const create = (token: string, body: Record<string, unknown>) => s.request('POST', '/api/v1/databases', { token, body });

  test('links: the URL reaches the app from its next release; only linked apps connect; deleting a linked database unlinks it', async () => {
    const { archive } = await busyboxArchive();
    // The linked app prints its URL and the password alone, as apps do by mistake: its logs mask both.
    const printing = await busyboxScriptArchive('echo "url=$DATABASE_URL"; echo "password=$(echo "$DATABASE_URL" | sed -e "s/.*:\\(.*\\)@.*/\\1/")"; mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p "${PORT:-8080}" -h /www');
    const linked = await createArchiveApp(s, alice.token, printing);
    const other = await createArchiveApp(s, bob.token, archive);
    const bobsDb = await create(bob.token, { name: 'bobs', engine: 'redis' });
    assert.equal(bobsDb.status, 201);

    const path = `/api/v1/deployments/${linked.id}/databases`;
    assertError(await s.request('POST', path, { token: alice.token, body: { database_id: pgId, env: 'PORT' } }), 400, 'validation_error');
    const invalidName = await s.request('POST', path, { token: alice.token, body: { database_id: pgId, env: '1BAD' } });
    assertError(invalidName, 400, 'validation_error');
    assert.match(invalidName.json.message, /1BAD/);
    assertError(await s.request('POST', path, { token: alice.token, body: { database_id: pgId, env: 'SLIPWAY_DB' } }), 400, 'validation_error');
    assertError(await s.request('POST', path, { token: alice.token, body: { database_id: bobsDb.json.id } }), 404, 'not_found', "another user's database");
    assertError(await s.request('POST', `/api/v1/deployments/${other.id}/databases`, { token: bob.token, body: { database_id: pgId } }), 404, 'not_found');
    assert.deepEqual((await s.request('GET', path, { token: alice.token })).json, [], 'no refusal left a link');

    const running = await waitForStatus(s, alice.token, pgId);
    assert.equal(running.status, 'running', running.error);
    const link = await s.request('POST', path, { token: alice.token, body: { database_id: pgId, env: 'DATABASE_URL' } });
    assert.equal(link.status, 201, link.text);
    assert.equal(link.json.env, 'DATABASE_URL');
    assertError(await s.request('POST', path, { token: alice.token, body: { database_id: pgId, env: 'OTHER_URL' } }), 409, 'invalid_state');
    const listed = await s.request('GET', path, { token: alice.token });
    assert.deepEqual(listed.json.map((l: { database_id: string }) => l.database_id), [pgId]);

    const deployed = await deployAndWait(s, alice.token, linked.id);
    assert.equal(deployed.status, 200, deployed.text);
    assert.equal((await deployAndWait(s, bob.token, other.id)).status, 200);
    const pending = async (): Promise<[boolean, string[]]> => {
      const dep = (await s.request('GET', `/api/v1/deployments/${linked.id}`, { token: alice.token })).json;
      return [dep.config_pending, dep.config_pending_keys];
    };
    assert.deepEqual(await pending(), [false, []], 'a link made before the first release is in it');
    const creds = (await s.request('GET', `/api/v1/databases/${pgId}/credentials`, { token: alice.token })).json;
    const [appContainer] = await appContainers(linked.id);
    const [otherContainer] = await appContainers(other.id);
    assert.ok(appContainer !== undefined && otherContainer !== undefined);
    const env = (await docker.getContainer(appContainer.Id).inspect()).Config.Env;
    assert.ok(env.includes(`DATABASE_URL=${creds.url}`), 'the URL is in the release environment');
    const appEnv = await s.request('GET', `/api/v1/deployments/${linked.id}/env`, { token: alice.token });
    assert.ok(!appEnv.text.includes(creds.password), 'the variables API never shows it');
    const logs = await eventually(async () => {
      const res = await s.request('GET', `/api/v1/deployments/${linked.id}/logs`, { token: alice.token });
      return res.text.includes('password=') ? res.text : undefined;
    }, 30_000);
    assert.ok(!logs.includes(creds.password), `the app's logs never show the password: ${logs}`);
    assert.match(logs, /url=\[redacted\]/);
    assert.match(logs, /password=\[redacted\]/);
    // The build log holds the release's start-up output too: masked the same way.
    const buildLog = (await s.request('GET', `/api/v1/deployments/${linked.id}/builds/${deployed.json.id}/logs`, { token: alice.token })).text;
    assert.match(buildLog, /url=\[redacted\]/);
    assert.ok(!buildLog.includes(creds.password), `the build log never shows the password: ${buildLog}`);

    // The real attempt: the linked app connects by the database's host name; the other tenant's app
    // reaches it neither by name nor by its address.
    const dbInfo = await databaseContainer(pgId);
    const dbAddress = Object.values(dbInfo!.NetworkSettings.Networks)[0]!.IPAddress;
    assert.equal(await canConnect(appContainer.Id, 'main-db', 5432), true, 'the linked app reaches the database');
    assert.equal(await canConnect(otherContainer.Id, 'main-db', 5432), false, "another tenant's app does not resolve it");
    assert.equal(await canConnect(otherContainer.Id, dbAddress, 5432), false, "another tenant's app does not reach its address");

    // Unlinking ends the access at once.
    assert.equal((await s.request('DELETE', `${path}/${pgId}`, { token: alice.token })).status, 204);
    assert.equal(await canConnect(appContainer.Id, 'main-db', 5432), false, 'unlinked: no longer reachable');
    assertError(await s.request('DELETE', `${path}/${pgId}`, { token: alice.token }), 404, 'not_found');
    // The running release still has the variable: pending until the next release (issue 33 item 2).
    assert.deepEqual(await pending(), [true, ['DATABASE_URL']], 'an unlink is pending');
    const afterUnlink = (await s.request('GET', `/api/v1/deployments/${linked.id}/logs`, { token: alice.token })).text;
    assert.match(afterUnlink, /password=\[redacted\]/);
    assert.ok(!afterUnlink.includes(creds.password), `the release still holding the URL stays masked after the unlink: ${afterUnlink}`);
    assert.equal((await s.request('POST', `/api/v1/deployments/${linked.id}/restart`, { token: alice.token })).status, 200);
    assert.deepEqual(await pending(), [false, []], 'the restart applied it');

    // Linked again, then deleted (a link does not hold a deletion back): container, network, volume and the link go.
    assert.equal((await s.request('POST', path, { token: alice.token, body: { database_id: pgId } })).status, 201);
    assert.deepEqual(await pending(), [true, ['DATABASE_URL']], 'a link to a running app is pending');
    const network = Object.keys(dbInfo!.NetworkSettings.Networks)[0]!;
    const volume = dbInfo!.Mounts[0]!.Name!;
    assert.equal((await s.request('DELETE', `/api/v1/databases/${pgId}`, { token: alice.token })).status, 204);
    assert.equal(await databaseContainer(pgId), undefined);
    await assert.rejects(docker.getNetwork(network).inspect(), /404|no such network|not found/i);
    await assert.rejects(docker.getVolume(volume).inspect(), /404|no such volume|not found/i);
    assert.deepEqual((await s.request('GET', path, { token: alice.token })).json, []);
    await eventually(async () => ((await s.request('GET', `/api/v1/databases/${bobsDb.json.id}`, { token: bob.token })).json.status !== 'creating' ? true : undefined), 180_000);
  });
});
