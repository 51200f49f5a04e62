// End to end, MariaDB and Redis backups (decisions §20) into a local destination: each verified by a restore into a throwaway container of its image (tables for MariaDB, the key count for Redis).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../helpers/apps.js';
import { assertError } from '../helpers/api-assert.js';
import { STAND_IN_IMAGES, databaseContainer, runIn, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

describe('MariaDB and Redis backups', () => {
  let s: TestServer;
  let alice: User;
  let destinationId: string;
  const ids: Record<string, string> = {};

  const logged: string[] = [];

  before(async () => {
    s = await startTestServer(STAND_IN_IMAGES, undefined, { log: (level, message, detail) => logged.push(`${level}: ${message} ${JSON.stringify(detail ?? {})}`) });
    alice = await s.newUser('alice');
    destinationId = (await s.request('POST', '/api/v1/backup-destinations', { token: alice.token, body: { name: 'here', type: 'local' } })).json.id;
    // All four start at once: MariaDB's and Redis's, and the two Redis the delete tests remove.
    for (const [key, name, engine] of [['mysql', 'mysql-db', 'mysql'], ['redis', 'redis-db', 'redis'], ['gone', 'redis-gone', 'redis'], ['race', 'redis-race', 'redis']] as const) {
      const created = await s.request('POST', '/api/v1/databases', { token: alice.token, body: { name, engine } });
      assert.equal(created.status, 201, created.text);
      ids[key] = created.json.id;
    }
    for (const id of Object.values(ids)) {
      const ready = await waitForStatus(s, alice.token, id);
      assert.equal(ready.status, 'running', ready.error);
    }
  });
  after(async () => {
    await s?.close();
  });

  const backupAndWait = async (id: string) => {
    const started = await s.request('POST', `/api/v1/databases/${id}/backups`, { token: alice.token, body: { destination_id: destinationId } });
    assert.equal(started.status, 202, started.text);
    return eventually(async () => {
      const res = await s.request('GET', `/api/v1/databases/${id}/backups/${started.json.id}`, { token: alice.token });
      return res.json?.status === 'running' || res.json?.status === 'succeeded' ? undefined : res.json;
    }, 120_000, 'the backup to end');
  };

  const restoreAndWait = async (id: string, body: object) => {
    const started = await s.request('POST', `/api/v1/databases/${id}/restore`, { token: alice.token, body });
    assert.equal(started.status, 202, started.text);
    return eventually(async () => {
      const res = await s.request('GET', `/api/v1/databases/${id}/restores/${started.json.id}`, { token: alice.token });
      return res.json?.status === 'running' ? undefined : res.json;
    }, 180_000, 'the restore to end');
  };
  const redisKeys = async (id: string): Promise<string[]> => {
    const creds = (await s.request('GET', `/api/v1/databases/${id}/credentials`, { token: alice.token })).json;
    const out = await runIn((await databaseContainer(id))!.Id, ['redis-cli', '--no-auth-warning', 'keys', '*'], { REDISCLI_AUTH: creds.password });
    return out.split('\n').map((k) => k.trim()).filter(Boolean).sort();
  };

  test('MariaDB: mariadb-dump, verified by an import whose tables match', async () => {
    const creds = (await s.request('GET', `/api/v1/databases/${ids['mysql']}/credentials`, { token: alice.token })).json;
    const container = (await databaseContainer(ids['mysql']!))!.Id;
    await runIn(container, ['mariadb', '--protocol=TCP', '-h', '127.0.0.1', '-u', creds.username, creds.database, '-e', 'create table a (id int); insert into a values (1),(2); create table b (v text);'], { MYSQL_PWD: creds.password });
    const done = await backupAndWait(ids['mysql']!);
    assert.equal(done.status, 'verified', done.error);
    const download = await s.request('GET', `/api/v1/databases/${ids['mysql']}/backups/${done.id}/download`, { token: alice.token });
    assert.match(download.text, /CREATE TABLE `a`/);
  });

  test('Redis: an RDB snapshot, verified by loading it and counting its keys; restored in place (its data replaced, kept across a restart, its linked app restarted) and into a new database', async () => {
    const redis = ids['redis']!;
    const creds = (await s.request('GET', `/api/v1/databases/${redis}/credentials`, { token: alice.token })).json;
    const cli = async (...args: string[]) => runIn((await databaseContainer(redis))!.Id, ['redis-cli', '--no-auth-warning', ...args], { REDISCLI_AUTH: creds.password });
    await cli('mset', 'k1', 'v', 'k2', 'v', 'k3', 'v');
    const done = await backupAndWait(redis);
    assert.equal(done.status, 'verified', done.error);
    await cli('del', 'k1');
    await cli('mset', 'k4', 'v', 'k5', 'v');
    // An app linked to it, live: the restore in place restarts it (its connections were to the replaced data).
    const app = await createArchiveApp(s, alice.token, (await busyboxArchive()).archive);
    assert.equal((await s.request('POST', `/api/v1/deployments/${app.id}/databases`, { token: alice.token, body: { database_id: redis } })).status, 201);
    const deployed = await deployAndWait(s, alice.token, app.id);
    assert.equal(deployed.status, 200, deployed.text);
    const restarts = async (): Promise<number> =>
      ((await s.request('GET', `/api/v1/audit?target_id=${app.id}`, { token: alice.token })).json as Array<{ action: string }>).filter((e) => e.action === 'deployment.restart').length;
    assert.equal(await restarts(), 0);

    const inPlace = await restoreAndWait(redis, { backup_id: done.id });
    assert.equal(inPlace.status, 'succeeded', inPlace.error);
    await eventually(async () => ((await restarts()) === 1 ? true : undefined), 60_000, 'the linked app restarted');
    assert.equal((await s.request('GET', `/api/v1/deployments/${app.id}`, { token: alice.token })).json.status, 'running');
    assert.ok(inPlace.safety_backup_id, 'a safety backup was taken first');
    assert.deepEqual(await redisKeys(redis), ['k1', 'k2', 'k3']);
    // The restored data is the server's own: a write after it and the restored keys survive a restart.
    await cli('set', 'k6', 'v');
    assert.equal((await s.request('POST', `/api/v1/databases/${redis}/stop`, { token: alice.token })).status, 200);
    assert.equal((await s.request('POST', `/api/v1/databases/${redis}/start`, { token: alice.token })).json.status, 'running');
    assert.deepEqual(await redisKeys(redis), ['k1', 'k2', 'k3', 'k6']);
    const safety = (await s.request('GET', `/api/v1/databases/${redis}/backups/${inPlace.safety_backup_id}`, { token: alice.token })).json;
    assert.equal(safety.trigger, 'safety');

    const into = await restoreAndWait(redis, { backup_id: done.id, into: 'redis-copy' });
    assert.equal(into.status, 'succeeded', into.error);
    assert.notEqual(into.target_database_id, redis);
    assert.deepEqual(await redisKeys(into.target_database_id), ['k1', 'k2', 'k3']);
  });

  test("DELETE ?delete_backups=true deletes its backups with it (their objects in the destination), not another database's", async () => {
    const copy = (await s.request('GET', `/api/v1/databases/${ids['gone']}`, { token: alice.token })).json;
    assert.equal(copy.status, 'running', copy.error);
    const done = await backupAndWait(copy.id);
    assert.equal(done.status, 'verified', done.error);
    const object = path.join(s.dataDir, 'backups', destinationId, done.location);
    assert.ok(fs.existsSync(object), 'the backup is in the destination');
    const bad = await s.request('DELETE', `/api/v1/databases/${copy.id}?delete_backups=maybe`, { token: alice.token });
    assertError(bad, 400, 'validation_error');
    assert.equal((await s.request('GET', `/api/v1/databases/${copy.id}`, { token: alice.token })).status, 200, 'a refused delete changes nothing');
    const deleted = await s.request('DELETE', `/api/v1/databases/${copy.id}?delete_backups=true`, { token: alice.token });
    assert.equal(deleted.status, 204, deleted.text);
    assert.equal(fs.existsSync(object), false, 'its backup object is deleted');
    // The other databases' backups (taken above) stay in the destination: they were not asked for.
    const kept = (await s.request('GET', `/api/v1/databases/${ids['mysql']}/backups`, { token: alice.token })).json;
    assert.ok(kept.every((b: { location: string; status: string }) => b.status === 'failed' || fs.existsSync(path.join(s.dataDir, 'backups', destinationId, b.location))));
  });

  test('deleted with its backups while one runs: nothing of that backup stays in the destination, and no failure is told of it', async () => {
    const id = ids['race']!;
    const started = await s.request('POST', `/api/v1/databases/${id}/backups`, { token: alice.token, body: { destination_id: destinationId } });
    assert.equal(started.status, 202, started.text);
    const deleted = await s.request('DELETE', `/api/v1/databases/${id}?delete_backups=true`, { token: alice.token });
    assert.equal(deleted.status, 204, deleted.text);
    const folder = path.join(s.dataDir, 'backups', destinationId);
    // The object or its `.partial`, wherever the run had got to when the database went.
    const leftovers = (): string[] => (fs.existsSync(folder) ? fs.readdirSync(folder, { recursive: true }).map(String).filter((name) => name.includes(started.json.id)) : []);
    await eventually(async () => (leftovers().length === 0 ? true : undefined), 30_000, 'nothing of the deleted backup in the destination');
    // Its runner ends within moments of its database's container going: nothing of it appears afterwards.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.deepEqual(leftovers(), []);
    assert.deepEqual(logged.filter((line) => line.includes(started.json.id)), [], 'no backup.failed (its failure is logged with it)');
    assertError(await s.request('GET', `/api/v1/databases/${id}/backups/${started.json.id}`, { token: alice.token }), 404, 'not_found');
  });

  test('a schedule on the database (PATCH backup): checked, shown, and its destination cannot be deleted while used', async () => {
    const path = `/api/v1/databases/${ids['redis']}`;
    for (const bad of [{ schedule: 'often', destination_id: destinationId }, { schedule: '0 3 * * *', destination_id: destinationId, keep: 0 }, { schedule: '0 3 * * *', destination_id: destinationId, keep: 366 }, { schedule: '0 3 * * *', destination_id: destinationId, pitr: true }]) {
      assertError(await s.request('PATCH', path, { token: alice.token, body: { backup: bad } }), 400, 'validation_error', JSON.stringify(bad));
    }
    const bob = await s.newUser('bob');
    const bobs = (await s.request('POST', '/api/v1/backup-destinations', { token: bob.token, body: { name: 'bobs', type: 'local' } })).json;
    assertError(await s.request('PATCH', path, { token: alice.token, body: { backup: { schedule: '0 3 * * *', destination_id: bobs.id } } }), 404, 'not_found', "another user's destination");
    const set = await s.request('PATCH', path, { token: alice.token, body: { backup: { schedule: '0 3 * * *', destination_id: destinationId, keep: 3 } } });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual(set.json.backup, { schedule: '0 3 * * *', destination_id: destinationId, keep: 3, pitr: false });
    assert.deepEqual((await s.request('GET', path, { token: alice.token })).json.backup, set.json.backup, 'GET shows the schedule');
    const listed = (await s.request('GET', '/api/v1/databases', { token: alice.token })).json;
    assert.deepEqual(listed.find((d: { id: string }) => d.id === ids['redis']).backup, set.json.backup, 'the list shows it');
    assert.equal(listed.find((d: { id: string }) => d.id === ids['mysql']).backup, null, 'a database without a schedule shows null');
    const refused = await s.request('DELETE', `/api/v1/backup-destinations/${destinationId}`, { token: alice.token });
    assertError(refused, 409, 'invalid_state');
    assert.match(refused.json.message, /redis-db/);
    const removed = await s.request('PATCH', path, { token: alice.token, body: { backup: null } });
    assert.equal(removed.json.backup, null);
    assert.equal((await s.request('GET', path, { token: alice.token })).json.backup, null);
    assert.equal((await s.request('DELETE', `/api/v1/backup-destinations/${destinationId}`, { token: alice.token })).status, 204);
    // Every change is in the audit log (Part four): a backup taken, the schedule set and removed.
    const actions = new Set((await s.request('GET', `/api/v1/audit?target_id=${ids['redis']}&limit=500`, { token: alice.token })).json.map((e: { action: string }) => e.action));
    for (const action of ['database.backup.create', 'database.backup_schedule.set', 'database.backup_schedule.remove']) assert.ok(actions.has(action), `${action} in ${[...actions].join(', ')}`);
  });
});
