// Unit test of the schedules' round with backups whose instance is gone: one cut mid-dump is failed ("instance lost") and a manual one taken again; one cut mid-verification is verified again, not failed as lost.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { databasePitrStore } from '../../src/db/pitr-store.js';
import { databaseBackupStore } from '../../src/db/backup-store.js';
import type { Db } from '../../src/db/database.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import type { BackupRow, BackupStore } from '../../src/backups/backup-store.js';
import { BackupWork } from '../../src/backups/backup-work.js';
import type { BackupsContext } from '../../src/backups/backups-context.js';
import { scheduleRound } from '../../src/backups/scheduler.js';
import type { AppEvent } from '../../src/domain/app-events.js';
import { eventually } from '../helpers/apps.js';
import { openTestDatabase } from '../helpers/server.js';

const audit = { actor: { userId: 'u1', via: 'session', ip: null }, event: { action: 'test', targetType: 'backup_destination', targetId: 'x', teamId: null } };

describe('backups lost with their instance', () => {
  let db: Db;
  let close: () => Promise<void>;
  let store: BackupStore;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-lost-backups-'));
  const events: AppEvent[] = [];
  let ctx: BackupsContext;

  before(async () => {
    ({ db, close } = await openTestDatabase('lost-backups', ['u1']));
    store = databaseBackupStore(db, new ValueCipher(crypto.randomBytes(32)));
    const now = new Date().toISOString();
    await store.createDestination({ id: 'd1', name: 'here', type: 'local', user_id: 'u1', team_id: null, settings: null, created_at: now, updated_at: now }, null, audit as never);
    // An engine with no containers, that cannot run one: a retaken backup fails at its dump, a verification at its start.
    const engine = { listContainers: async () => [], runContainer: async () => Promise.reject(new Error('no engine here')), removeContainer: async () => undefined };
    const database = { id: 'db1', seq: 1, name: 'main', engine: 'redis', image: 'img', status: 'running', error: null, user_id: 'u1', team_id: null, memory_bytes: null, nano_cpus: null, container_id: null, size_bytes: 0, worker_instance: null, created_at: now, updated_at: now };
    ctx = {
      store,
      pitr: databasePitrStore(db),
      databases: { engine, instanceId: 'inst', limits: { defaultNanoCpus: 1e9 }, store: { get: async (id: string) => (id === 'db1' ? database : undefined), credentials: async () => undefined }, log: () => undefined } as never,
      dataDir,
      allowPrivateTargets: true,
      streamKey: crypto.randomBytes(32),
      runner: 'me',
      events: { emit: (e: AppEvent) => void events.push(e) },
      work: new BackupWork(),
      log: () => undefined,
      restartApp: async () => undefined,
    };
  });
  after(async () => {
    await ctx?.work.close();
    await close?.();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const row = (id: string, status: BackupRow['status'], trigger: BackupRow['trigger']): Omit<BackupRow, 'seq'> => ({
    id, database_id: 'db1', database_name: 'main', engine: 'redis', image: 'img', user_id: 'u1', team_id: null, destination_id: 'd1', status, trigger,
    size_bytes: status === 'succeeded' ? 10 : null, sha256: status === 'succeeded' ? 'ab' : null, location: `main/${id}.rdb.slwb`, source_counts: null, runner: 'dead-instance',
    due_at: null, started_at: new Date(Date.now() - 60_000).toISOString(), finished_at: status === 'succeeded' ? new Date().toISOString() : null, verified_at: null, error: null,
  });

  test('cut mid-dump: failed "instance lost" with a backup.failed event, and a manual one taken again; cut mid-verification: verified again', async () => {
    const [dumping, verifying] = [crypto.randomUUID(), crypto.randomUUID()];
    await store.createBackup(row(dumping, 'running', 'manual'));
    await store.createBackup(row(verifying, 'succeeded', 'manual'));
    await store.createBackup({ ...row(crypto.randomUUID(), 'running', 'manual'), runner: 'live-instance' });

    await scheduleRound(ctx, ['me', 'live-instance'], new Date());
    const lost = await store.getBackup(dumping);
    assert.equal(lost?.status, 'failed');
    assert.match(lost?.error ?? '', /^instance lost: /);
    assert.ok(events.some((e) => e.type === 'backup.failed' && e.backupId === dumping && e.step === 'instance lost'));

    // A retake failing at its dump first looks up to 10 s for its database being deleted (this one is not).
    const all = await eventually(async () => {
      const list = await store.listBackups('db1', undefined, 10);
      return list.every((b) => b.status !== 'succeeded' && (b.runner === 'live-instance' || b.status !== 'running')) ? list : undefined;
    }, 30_000, 'the retake and the verification to end');
    const retaken = all.filter((b) => b.id !== dumping && b.id !== verifying && b.runner !== 'live-instance');
    assert.equal(retaken.length, 1, 'one manual backup taken again');
    assert.equal(retaken[0]?.trigger, 'manual');
    assert.match(retaken[0]?.error ?? '', /^dump: /, 'taken again for real (this engine has no database container)');
    const reverified = await store.getBackup(verifying);
    assert.match(reverified?.error ?? '', /^verify: start: /, 'verified again (here the throwaway cannot start), not failed as lost');
    assert.equal(all.filter((b) => b.runner === 'live-instance').length, 1, "a backup of a live instance is left to it");
  });
});
