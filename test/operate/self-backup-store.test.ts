// Self-backup and restore at the store level, on SQLite or (with SLIPWAY_TEST_DATABASE_URL) PostgreSQL: every row comes back, binary uploads included; a newer backup and an occupied target are refused with nothing written; a failed `server restore` leaves the data directory as it found it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, test } from 'node:test';
import { latestMigrationName, openDatabase, type Db } from '../../src/db/database.js';
import { BackupReadError } from '../../src/operate/backup-format.js';
import { REBUILD_MARKER } from '../../src/operate/restore-rebuilds.js';
import { takeSelfBackup } from '../../src/operate/self-backup.js';
import { RestoreRefused, restoreSelfBackup } from '../../src/operate/self-restore.js';
import { cli } from '../helpers/cli.js';
import { testDatabase, testEnv } from '../helpers/server.js';

const KEY = crypto.randomBytes(32);
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A fresh installation target: a data directory, and its own PostgreSQL database in the PostgreSQL pass. */
async function target(label: string): Promise<{ dataDir: string; url: string | undefined; open: () => Promise<Db> }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-self-backup-${label}-`));
  const database = await testDatabase();
  cleanups.push(async () => {
    await database?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return { dataDir, url: database?.url, open: () => openDatabase({ file: path.join(dataDir, 'slipway.db'), url: database?.url }) };
}

async function backupOf(source: { dataDir: string; url: string | undefined }): Promise<Buffer> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  await takeSelfBackup({ dataDir: source.dataDir, databaseUrl: source.url, installationKey: KEY, version: '0.1.0' }, out);
  return Buffer.concat(chunks);
}

function restoreInto(into: { dataDir: string; url: string | undefined }, file: Buffer, force = false): ReturnType<typeof restoreSelfBackup> {
  return restoreSelfBackup(
    { dataDir: into.dataDir, databaseUrl: into.url, installationKey: KEY, force, version: '0.1.0', schema: latestMigrationName(), openDatabase },
    Readable.from([file]),
  );
}

test('every row comes back (binary chunks included), the uploads and logs too, and the live deployment is listed for rebuilding', async () => {
  const source = await target('source');
  const db = await source.open();
  const now = new Date().toISOString();
  await db.insertInto('instance').values({ id: 'inst-1', created_at: now }).execute();
  await db.insertInto('users').values({ id: 'u1', email: 'a@example.test', password_hash: 'hash', is_admin: 1, created_at: now, updated_at: now }).execute();
  await db
    .insertInto('deployments')
    .values({ id: 'd1', user_id: 'u1', name: 'd1', subdomain: 'd1', source_type: 'archive', dockerfile_path: 'Dockerfile', status: 'running', upload_id: 'up1', upload_size: 13, upload_sha256: 'a'.repeat(64), live_build_id: null, health_check_path: null, memory_bytes: null, nano_cpus: null, team_id: null, repo_url: null, branch: null, created_at: now, updated_at: now })
    .execute();
  await db.insertInto('builds').values({ id: 'b1', deployment_id: 'd1', status: 'succeeded', commit_sha: 'a'.repeat(64), source_ref: 'up1', error: null, image_id: 'sha256:gone', container_id: 'gone', upstreams: null, started_at: now, finished_at: now, runner: null }).execute();
  await db.updateTable('deployments').set({ live_build_id: 'b1' }).where('id', '=', 'd1').execute();
  const chunk = crypto.randomBytes(5000);
  await db.insertInto('upload_archives').values({ upload_id: 'up1', deployment_id: 'd1', dockerfile: null, size: chunk.length }).execute();
  await db.insertInto('upload_chunks').values({ upload_id: 'up1', seq: 0, data: chunk }).execute();
  await db.destroy();
  fs.mkdirSync(path.join(source.dataDir, 'uploads', 'd1', 'up1'), { recursive: true });
  fs.writeFileSync(path.join(source.dataDir, 'uploads', 'd1', 'up1', 'archive.tar.gz'), 'archive bytes');
  fs.mkdirSync(path.join(source.dataDir, 'logs'));
  fs.writeFileSync(path.join(source.dataDir, 'logs', 'b1.log'), 'a build log');
  fs.writeFileSync(path.join(source.dataDir, 'secret.key'), 'never in a backup');

  const file = await backupOf(source);
  assert.equal(file.indexOf(Buffer.from('never in a backup')), -1);
  const into = await target('into');
  const { header, rebuilds } = await restoreInto(into, file);
  assert.equal(header.database, source.url === undefined ? 'sqlite' : 'postgres');
  assert.equal(rebuilds, 1);
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(into.dataDir, REBUILD_MARKER), 'utf8')).deployments, [{ deployment_id: 'd1', user_id: 'u1', source_type: 'archive', branch: null, commit_sha: 'a'.repeat(64) }]);
  const restored = await into.open();
  try {
    assert.equal((await restored.selectFrom('instance').select('id').executeTakeFirst())?.id, 'inst-1');
    assert.equal((await restored.selectFrom('users').select('email').executeTakeFirst())?.email, 'a@example.test');
    const data = (await restored.selectFrom('upload_chunks').select('data').executeTakeFirst())?.data;
    assert.ok(data !== undefined && Buffer.from(data).equals(chunk));
  } finally {
    await restored.destroy();
  }
  assert.equal(fs.readFileSync(path.join(into.dataDir, 'uploads', 'd1', 'up1', 'archive.tar.gz'), 'utf8'), 'archive bytes');
  assert.equal(fs.readFileSync(path.join(into.dataDir, 'logs', 'b1.log'), 'utf8'), 'a build log');
  assert.equal(fs.existsSync(path.join(into.dataDir, 'secret.key')), false);

  // The target now holds an installation: refused without --force, replaced with it.
  await assert.rejects(restoreInto(into, file), (err) => err instanceof RestoreRefused && /holds (an )?installation.*--force/.test(err.message));
  await restoreInto(into, file, true);
});

test('a backup from a newer Slipway, or one cut short, is refused and the target stays empty', async () => {
  const source = await target('newer');
  const db = await source.open();
  await db.insertInto('kysely_migration' as never).values({ name: '2099-01-01-001-future', timestamp: new Date().toISOString() } as never).execute();
  await db.destroy();
  const file = await backupOf(source);
  const into = await target('refused');
  await assert.rejects(restoreInto(into, file), (err) => err instanceof RestoreRefused && /newer than this Slipway 0\.1\.0/.test(err.message));
  await assert.rejects(restoreInto(into, file.subarray(0, file.length - 10)), (err) => err instanceof BackupReadError || err instanceof RestoreRefused);
  assert.deepEqual(fs.readdirSync(into.dataDir), []);
  if (into.url !== undefined) {
    const { postgresHoldsInstallation } = await import('../../src/operate/postgres-export.js');
    assert.equal(await postgresHoldsInstallation(into.url), undefined);
  }
});

test('`server restore` with a wrong key or a corrupt file: a clear error, and the data directory as it was (a missing one still missing, an empty one still empty: no lock, no staging)', async () => {
  const source = await target('cli-source');
  await (await source.open()).destroy();
  const good = await backupOf(source);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-failed-restore-'));
  cleanups.push(async () => fs.rmSync(root, { recursive: true, force: true }));
  const backup = path.join(root, 'slipway.backup');
  fs.writeFileSync(backup, good);
  const corrupt = path.join(root, 'corrupt.backup');
  const bytes = Buffer.from(good);
  bytes[bytes.length - 30] = (bytes[bytes.length - 30] ?? 0) ^ 0xff;
  fs.writeFileSync(corrupt, bytes);
  const into = await target('cli-into');
  const restore = (dataDir: string, file: string, key: Buffer) =>
    cli(['server', 'restore', '--file', file], { home: root, env: testEnv(dataDir, { SLIPWAY_SECRET_KEY: key.toString('base64'), ...(into.url === undefined ? {} : { SLIPWAY_DATABASE_URL: into.url }) }) });

  const missing = path.join(root, 'not-yet', 'data');
  const empty = path.join(root, 'empty');
  fs.mkdirSync(empty, { mode: 0o700 });
  for (const [file, key, message] of [
    [backup, crypto.randomBytes(32), /another installation key.*Nothing was written/],
    [corrupt, KEY, /corrupt or was altered.*Nothing was written/],
  ] as const) {
    const intoMissing = await restore(missing, file, key);
    assert.equal(intoMissing.code, 1, intoMissing.stderr);
    assert.match(intoMissing.stderr, message);
    assert.equal(fs.existsSync(path.join(root, 'not-yet')), false, 'a data directory (and parent) that did not exist does not exist after');
    const intoEmpty = await restore(empty, file, key);
    assert.equal(intoEmpty.code, 1, intoEmpty.stderr);
    assert.match(intoEmpty.stderr, message);
    assert.deepEqual(fs.readdirSync(empty), [], 'an empty data directory is left empty');
    assert.equal(fs.statSync(empty).mode & 0o777, 0o700);
  }
  if (into.url !== undefined) {
    const { postgresHoldsInstallation } = await import('../../src/operate/postgres-export.js');
    assert.equal(await postgresHoldsInstallation(into.url), undefined);
  }
  // The same file with the right key restores (the failures were the key's and the bytes', not the command's).
  const restored = await restore(missing, backup, KEY);
  assert.equal(restored.code, 0, restored.stderr);
  assert.ok(fs.existsSync(path.join(missing, 'restore-rebuild.json')));
});

