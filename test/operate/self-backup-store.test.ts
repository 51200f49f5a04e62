// Self-backup and restore at the store level, on SQLite or (with SLIPWAY_TEST_DATABASE_URL) PostgreSQL: every row comes back, binary uploads included; a newer backup and an occupied target are refused with nothing written.
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
import { testDatabase } from '../helpers/server.js';

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
