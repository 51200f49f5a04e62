// The backup store on each dialect: a destination's secret is ciphertext at rest and opens only in its row; a scheduled backup is recorded once per (database, due time).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import crypto from 'node:crypto';
import { databaseBackupStore } from '../../src/db/backup-store.js';
import type { Db } from '../../src/db/database.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { openTestDatabase } from '../helpers/server.js';
import type { BackupRow } from '../../src/backups/backup-store.js';

const audit = { actor: { userId: 'u1', via: 'session', ip: null }, event: { action: 'test', targetType: 'backup_destination', targetId: 'x', teamId: null } };

describe('backup store', () => {
  let db: Db;
  let close: () => Promise<void>;
  const cipher = new ValueCipher(crypto.randomBytes(32));

  before(async () => {
    ({ db, close } = await openTestDatabase('backup-store', ['u1']));
  });
  after(async () => close?.());

  test('the secret is encrypted at rest, bound to its row, and read back decrypted', async () => {
    const store = databaseBackupStore(db, cipher);
    const now = new Date().toISOString();
    const id = crypto.randomUUID();
    const settings = { endpoint: 'https://s3.example.com', region: 'eu', bucket: 'b1', prefix: '', access_key_id: 'AK', force_path_style: false };
    assert.equal(await store.createDestination({ id, name: 'd', type: 's3', user_id: 'u1', team_id: null, settings, created_at: now, updated_at: now }, 'top-secret-value', audit as never), 'created');
    const raw = await db.selectFrom('backup_destinations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.ok(!JSON.stringify(raw).includes('top-secret-value'));
    assert.equal(await store.destinationSecret(id), 'top-secret-value');
    assert.deepEqual((await store.getDestination(id))?.settings, settings);
    const other = crypto.randomUUID();
    await store.createDestination({ id: other, name: 'e', type: 'local', user_id: 'u1', team_id: null, settings: null, created_at: now, updated_at: now }, null, audit as never);
    await db.updateTable('backup_destinations').set({ secret: raw.secret }).where('id', '=', other).execute();
    await assert.rejects(store.destinationSecret(other), /does not decrypt/, 'a ciphertext copied to another row does not open');
  });

  test('a scheduled backup is recorded once per database and due time', async () => {
    const store = databaseBackupStore(db, cipher);
    const row = (id: string, dueAt: string | null): Omit<BackupRow, 'seq'> => ({
      id, database_id: 'db1', database_name: 'main', engine: 'postgres', image: 'img', user_id: 'u1', team_id: null, destination_id: 'd1', status: 'running',
      trigger: dueAt === null ? 'manual' : 'schedule', size_bytes: null, sha256: null, location: `x/${id}`, source_counts: null, runner: 'r1', due_at: dueAt,
      started_at: new Date().toISOString(), finished_at: null, verified_at: null, error: null,
    });
    const due = '2026-11-28T03:00:00.000Z';
    const results = await Promise.all([store.createBackup(row(crypto.randomUUID(), due)), store.createBackup(row(crypto.randomUUID(), due))]);
    assert.deepEqual(results.sort(), ['created', 'due_taken']);
    assert.equal(await store.createBackup(row(crypto.randomUUID(), null)), 'created');
    assert.equal(await store.createBackup(row(crypto.randomUUID(), null)), 'created', 'manual backups have no due time and never collide');
    const listed = await store.listBackups('db1', undefined, 10);
    assert.equal(listed.length, 3);
    assert.ok(listed[0]!.seq > listed[2]!.seq, 'newest first');
  });
});
