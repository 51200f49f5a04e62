// End to end, PostgreSQL backups (decisions §20) against s3rver on loopback and a stand-in database: backup → verified by a real restore → downloaded decrypted; a tampered object is refused.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually } from '../helpers/apps.js';
import { assertError } from '../helpers/api-assert.js';
import { STAND_IN_IMAGES, databaseContainer, docker, psql, runIn, waitForStatus } from '../helpers/databases.js';
import { postgresAdapter } from '../../src/databases/postgres-adapter.js';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import type { AppEvent } from '../../src/domain/app-events.js';
import { LABEL_SERVICE_OF } from '../../src/runtime/service.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

describe('PostgreSQL backups', () => {
  let s: TestServer;
  let s3: TestS3;
  let alice: User;
  let dbId: string;
  let destinationId: string;
  let creds: { username: string; password: string; database: string };
  let containerId: string;
  const events: AppEvent[] = [];

  before(async () => {
    s3 = await startS3();
    s = await startTestServer({ ...STAND_IN_IMAGES, SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true' });
    s.server.appEvents.onAny((event) => events.push(event));
    alice = await s.newUser('alice');
    const destination = await s.request('POST', '/api/v1/backup-destinations', {
      token: alice.token,
      body: { name: 'offsite', type: 's3', endpoint: s3.endpoint, region: 'us-east-1', bucket: s3.bucket, prefix: 'pg', access_key_id: S3_ACCESS_KEY, secret_access_key: S3_SECRET_KEY, force_path_style: true },
    });
    assert.equal(destination.status, 201, destination.text);
    destinationId = destination.json.id;
    const created = await s.request('POST', '/api/v1/databases', { token: alice.token, body: { name: 'shop', engine: 'postgres' } });
    assert.equal(created.status, 201, created.text);
    dbId = created.json.id;
    assert.equal((await waitForStatus(s, alice.token, dbId)).status, 'running');
    creds = (await s.request('GET', `/api/v1/databases/${dbId}/credentials`, { token: alice.token })).json;
    containerId = (await databaseContainer(dbId))!.Id;
    await psql(containerId, creds, "create table items (id serial primary key, name text); insert into items (name) select 'item-' || g from generate_series(1, 500) g; create table orders (id int); insert into orders values (1), (2), (3);");
  });
  after(async () => {
    await s?.close();
    await s3?.close();
  });

  const waitForBackup = (id: string) =>
    eventually(async () => {
      const res = await s.request('GET', `/api/v1/databases/${dbId}/backups/${id}`, { token: alice.token });
      return res.json?.status === 'running' || res.json?.status === 'succeeded' ? undefined : res.json;
    }, 120_000, `backup ${id} to end`);

  /** The file s3rver keeps a backup's object in. */
  const objectFile = (location: string): string => path.join(s3.directory, s3.bucket, `pg/${location}._S3rver_object`);

  let backupId: string;

  test('a backup is streamed encrypted to S3, verified by a restore into a throwaway container (removed), listed, and downloads decrypted', async () => {
    const started = await s.request('POST', `/api/v1/databases/${dbId}/backups`, { token: alice.token, body: { destination_id: destinationId } });
    assert.equal(started.status, 202, started.text);
    assert.equal(started.json.status, 'running');
    assert.equal(started.json.trigger, 'manual');
    backupId = started.json.id;
    const done = await waitForBackup(backupId);
    assert.equal(done.status, 'verified', done.error);
    assert.ok(done.verified_at !== null && done.finished_at !== null);
    const stored = await fs.readFile(objectFile(done.location));
    assert.equal(stored.length, done.size_bytes);
    assert.equal(crypto.createHash('sha256').update(stored).digest('hex'), done.sha256);
    assert.equal(stored.subarray(0, 8).toString(), 'SLIPWAYB', 'the stored object is the encrypted format');
    assert.ok(events.some((e) => e.type === 'backup.verified' && e.backupId === backupId), 'backup.verified was emitted');
    const throwaways = await docker.listContainers({ all: true, filters: { label: [`${LABEL_SERVICE_OF}=${s.server.instanceId}`] } });
    assert.deepEqual(throwaways.filter((c) => c.Names.some((n) => n.includes('slipway-verify-'))), [], 'the throwaway container is gone');

    const list = await s.request('GET', `/api/v1/databases/${dbId}/backups`, { token: alice.token });
    assert.deepEqual(list.json.map((b: { id: string }) => b.id), [backupId]);

    const download = await fetch(`${s.url}/api/v1/databases/${dbId}/backups/${backupId}/download`, { headers: { authorization: `Bearer ${alice.token}` } });
    assert.equal(download.status, 200);
    const dump = Buffer.from(await download.arrayBuffer());
    assert.equal(dump.subarray(0, 5).toString(), 'PGDMP', 'the download is pg_dump\'s custom format');
    assert.ok(dump.includes(Buffer.from('items')), 'it holds the table');

    const other = await s.newUser('mallory');
    assert.equal((await s.request('GET', `/api/v1/databases/${dbId}/backups/${backupId}`, { token: other.token })).status, 404);
    assert.equal((await s.request('GET', `/api/v1/databases/${dbId}/backups/${backupId}/download`, { token: other.token })).status, 404);
  });

  test('a tampered object is refused: tampered or corrupt', async () => {
    const backup = (await s.request('GET', `/api/v1/databases/${dbId}/backups/${backupId}`, { token: alice.token })).json;
    const file = objectFile(backup.location);
    const original = await fs.readFile(file);
    const tampered = Buffer.from(original);
    tampered[100] = tampered[100]! ^ 0xff;
    await fs.writeFile(file, tampered);
    try {
      const res = await s.request('GET', `/api/v1/databases/${dbId}/backups/${backupId}/download`, { token: alice.token });
      assertError(res, 409, 'invalid_state');
      assert.match(res.json.message, /tampered or corrupt/);
    } finally {
      await fs.writeFile(file, original);
    }
  });

  const waitForRestore = (id: string) =>
    eventually(async () => {
      const res = await s.request('GET', `/api/v1/databases/${dbId}/restores/${id}`, { token: alice.token });
      return res.json?.status === 'running' ? undefined : res.json;
    }, 180_000, `restore ${id} to end`);
  const count = (container: string, credentials = creds) => psql(container, credentials, 'select count(*) from items').then((out) => Number(out.trim()));

  test('restore in place (a safety backup first) and into a new database', async () => {
    await psql(containerId, creds, 'delete from items where id > 100');
    assert.equal(await count(containerId), 100);
    const started = await s.request('POST', `/api/v1/databases/${dbId}/restore`, { token: alice.token, body: { backup_id: backupId } });
    assert.equal(started.status, 202, started.text);
    const done = await waitForRestore(started.json.id);
    assert.equal(done.status, 'succeeded', done.error);
    assert.equal(await count(containerId), 500, 'the backup\'s rows are back');
    const safety = (await s.request('GET', `/api/v1/databases/${dbId}/backups/${done.safety_backup_id}`, { token: alice.token })).json;
    assert.equal(safety.trigger, 'safety');
    assert.equal(safety.status, 'succeeded', safety.error);

    const into = await s.request('POST', `/api/v1/databases/${dbId}/restore`, { token: alice.token, body: { backup_id: backupId, into: 'shop-copy' } });
    assert.equal(into.status, 202, into.text);
    const copied = await waitForRestore(into.json.id);
    assert.equal(copied.status, 'succeeded', copied.error);
    const copyCreds = (await s.request('GET', `/api/v1/databases/${copied.target_database_id}/credentials`, { token: alice.token })).json;
    assert.equal(await count((await databaseContainer(copied.target_database_id))!.Id, copyCreds), 500);
  });

  test('a tampered object restores nothing and fails the backup; a failed backup is refused', async () => {
    await psql(containerId, creds, 'delete from items where id > 400');
    const backup = (await s.request('GET', `/api/v1/databases/${dbId}/backups/${backupId}`, { token: alice.token })).json;
    const file = objectFile(backup.location);
    const tampered = await fs.readFile(file);
    tampered[tampered.length - 3] = tampered[tampered.length - 3]! ^ 0x01;
    await fs.writeFile(file, tampered);
    const started = await s.request('POST', `/api/v1/databases/${dbId}/restore`, { token: alice.token, body: { backup_id: backupId } });
    assert.equal(started.status, 202, started.text);
    const done = await waitForRestore(started.json.id);
    assert.equal(done.status, 'failed');
    assert.match(done.error, /tampered or corrupt/);
    assert.equal(await count(containerId), 400, 'nothing was restored');
    const failed = (await s.request('GET', `/api/v1/databases/${dbId}/backups/${backupId}`, { token: alice.token })).json;
    assert.equal(failed.status, 'failed');
    assert.ok(events.some((e) => e.type === 'backup.failed' && e.backupId === backupId));
    assertError(await s.request('POST', `/api/v1/databases/${dbId}/restore`, { token: alice.token, body: { backup_id: backupId } }), 409, 'invalid_state');
  });

  test("a destination with wrong credentials or no server: the backup fails naming the step, stores nothing; another user's destination is 404", async () => {
    const bob = await s.newUser('bob');
    const bobs = await s.request('POST', '/api/v1/backup-destinations', { token: bob.token, body: { name: 'bobs', type: 'local' } });
    assert.equal(bobs.status, 201, bobs.text);
    assertError(await s.request('POST', `/api/v1/databases/${dbId}/backups`, { token: alice.token, body: { destination_id: bobs.json.id } }), 404, 'not_found', "another user's destination");

    const s3Destination = async (name: string, changes: Record<string, unknown>): Promise<string> => {
      const res = await s.request('POST', '/api/v1/backup-destinations', {
        token: alice.token,
        body: { name, type: 's3', endpoint: s3.endpoint, region: 'us-east-1', bucket: s3.bucket, prefix: name, access_key_id: S3_ACCESS_KEY, secret_access_key: S3_SECRET_KEY, force_path_style: true, ...changes },
      });
      assert.equal(res.status, 201, res.text);
      return res.json.id as string;
    };
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const cases = [
      [await s3Destination('wrong-key', { access_key_id: 'NOT-A-KEY', secret_access_key: 'not-the-secret' }), 'auth'],
      [await s3Destination('no-server', { endpoint: `http://127.0.0.1:${port}` }), 'resolve'],
    ] as const;
    for (const [destination, step] of cases) {
      const startedAt = Date.now();
      const started = await s.request('POST', `/api/v1/databases/${dbId}/backups`, { token: alice.token, body: { destination_id: destination } });
      assert.equal(started.status, 202, started.text);
      const done = await waitForBackup(started.json.id);
      assert.equal(done.status, 'failed', step);
      assert.match(done.error, new RegExp(`^${step}: `), done.error);
      assert.ok(!done.error.includes('not-the-secret'));
      assert.ok(Date.now() - startedAt < 30_000, `failed within 30 s (${Date.now() - startedAt} ms)`);
      assert.ok(events.some((e) => e.type === 'backup.failed' && e.backupId === started.json.id && e.step === step), 'backup.failed names the step');
    }
    assert.deepEqual((await s3.objectFiles()).filter((f) => f.includes('wrong-key') || f.includes('no-server')), [], 'nothing was stored');
  });

  test('a restore that fails at its end leaves nothing behind, into an empty database too (one transaction)', async () => {
    // A classic late failure: an index on a function that names a table without its schema, which
    // pg_restore's empty search_path cannot find; the tables and their rows came before it.
    await psql(containerId, creds, 'create database late_source');
    await psql(containerId, creds, 'create database late_target');
    await psql(
      containerId,
      { ...creds, database: 'late_source' },
      'create table orders (id int); insert into orders values (1); create table items (id int); insert into items select generate_series(1, 100);' +
        " create function shifted(int) returns int language sql immutable as 'select $1 + (select count(*)::int from orders)'; create index on items (shifted(id));",
    );
    const env = { PGPASSWORD: creds.password };
    await runIn(containerId, ['pg_dump', '-Fc', '-f', '/tmp/late.dump', '-h', '127.0.0.1', '-U', creds.username, '-d', 'late_source'], env);
    const command = postgresAdapter.restore({ ...creds, database: 'late_target' }, { clean: false, cpus: 1 });
    const result = await createDockerEngine().execInContainer!(containerId, [...command.argv, '/tmp/late.dump'], { env: command.env, timeoutMs: 30_000 });
    assert.notEqual(result.exitCode, 0, result.output);
    assert.match(result.output, /orders/);
    const left = await psql(containerId, { ...creds, database: 'late_target' }, "select count(*) from pg_tables where schemaname = 'public'");
    assert.equal(Number(left.trim()), 0, 'no table was left half-restored');
  });
});
