// Unit tests of point-in-time recovery's pure rules: the log files' object names, the recoverable window, and what a recovery to a moment reads.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BaseBackupRow, WalFileRow } from '../../src/backups/pitr-store.js';
import { baseBackupKey, checkRecoveryTime, chooseBaseBackup, recoverableWindow, walFileKey, walFileOfKey, walFilesFor } from '../../src/backups/point-in-time-window.js';
import { postgresWal, recoveryTime } from '../../src/databases/postgres-wal.js';

const db = { name: 'ledger', id: '0e30dcce-d12a-4c1f-9d1e-7a2b3c4d5e6f' };

function base(id: string, startedAt: string, finishedAt: string | null, status: BaseBackupRow['status'] = 'succeeded', startWal = '000000010000000000000003'): BaseBackupRow {
  return { id, database_id: db.id, destination_id: 'd', location: `k/${id}`, start_wal: startWal, status, size_bytes: 1, sha256: 'x', runner: null, error: null, started_at: startedAt, finished_at: finishedAt };
}

function wal(name: string, closedAt: string): WalFileRow {
  return { database_id: db.id, name, destination_id: 'd', location: walFileKey(db, name), closed_at: closedAt, size_bytes: 1, sha256: 'x', uploaded_at: closedAt };
}

describe('point-in-time recovery rules', () => {
  test('log files are stored under the database prefix by the receiver\'s name; anything else is refused', () => {
    assert.equal(walFileKey(db, '000000010000000000000003.gz'), 'ledger-0e30dcce/pitr/wal/000000010000000000000003.gz.slwb');
    assert.equal(walFileKey(db, '00000002.history'), 'ledger-0e30dcce/pitr/wal/00000002.history.slwb');
    assert.equal(walFileOfKey('ledger-0e30dcce/pitr/wal/000000010000000000000003.gz.slwb'), '000000010000000000000003.gz');
    assert.equal(walFileOfKey('ledger-0e30dcce/20261128T101010Z-x.dump.slwb'), undefined);
    for (const bad of ['000000010000000000000003.gz.partial', '../../etc/passwd', '00000001000000000000000', 'x.history', '0000000100000000000000zz']) {
      assert.throws(() => walFileKey(db, bad), /not a write-ahead log file name/, bad);
    }
    assert.equal(baseBackupKey(db, 'b1', new Date('2026-11-28T10:11:12.345Z')), 'ledger-0e30dcce/pitr/base/20261128T101112Z-b1.tar.slwb');
  });

  test('the receiver\'s completed files are recognised, its partial one is not', () => {
    assert.ok(postgresWal.completed('000000010000000000000003.gz'));
    assert.ok(postgresWal.completed('00000002.history'));
    assert.ok(!postgresWal.completed('000000010000000000000004.gz.partial'));
    assert.deepEqual(postgresWal.restoredName('000000010000000000000003.gz'), { name: '000000010000000000000003', gzip: true });
    assert.equal(recoveryTime(new Date('2026-11-28T10:11:12.345Z')), '2026-11-28 10:11:12.345+00');
  });

  test('the window runs from the end of the oldest base backup that succeeded to the time the log is archived until', () => {
    const bases = [base('a', '2026-11-28T01:00:00Z', null, 'failed'), base('b', '2026-11-28T02:00:00Z', '2026-11-28T02:00:05Z'), base('c', '2026-11-28T03:00:00Z', '2026-11-28T03:00:04Z')];
    assert.deepEqual(recoverableWindow(bases, '2026-11-28T04:00:00Z'), { from: new Date('2026-11-28T02:00:05Z'), until: new Date('2026-11-28T04:00:00Z') });
    assert.equal(recoverableWindow(bases, null), undefined, 'no log archived yet');
    assert.equal(recoverableWindow([base('a', '2026-11-28T01:00:00Z', null, 'running')], '2026-11-28T04:00:00Z'), undefined, 'no base backup finished');
    assert.equal(recoverableWindow(bases, '2026-11-28T02:00:01Z'), undefined, 'the log not yet past the base backup');
  });

  test('a time is checked against the window, and the refusal names it', () => {
    const window = { from: new Date('2026-11-28T02:00:05Z'), until: new Date('2026-11-28T04:00:00Z') };
    assert.deepEqual(checkRecoveryTime('2026-11-28T04:30:00+01:00', window), new Date('2026-11-28T03:30:00Z'), 'any zone');
    assert.deepEqual(checkRecoveryTime('2026-11-28T03:30:00.250Z', window), new Date('2026-11-28T03:30:00.250Z'));
    for (const outside of ['2026-11-28T02:00:04Z', '2026-11-28T04:00:01Z']) {
      assert.throws(() => checkRecoveryTime(outside, window), (err: Error & { code?: string }) => err.code === 'validation_error' && err.message.includes('2026-11-28T02:00:05.000Z to 2026-11-28T04:00:00.000Z'), outside);
    }
    for (const bad of ['yesterday', '2026-11-28 03:00', '2026-11-28T03:00:00', 42, undefined]) {
      assert.throws(() => checkRecoveryTime(bad, window), { code: 'validation_error' }, String(bad));
    }
    assert.throws(() => checkRecoveryTime('2026-11-28T03:00:00Z', undefined), /no recoverable window yet/);
  });

  test('a recovery starts from the newest base backup that ended before the time and reads the log from its start through the first file closed after it', () => {
    const bases = [base('b', '2026-11-28T02:00:00Z', '2026-11-28T02:00:05Z', 'succeeded', '000000010000000000000003'), base('c', '2026-11-28T03:00:00Z', '2026-11-28T03:00:04Z', 'succeeded', '000000010000000000000006')];
    assert.equal(chooseBaseBackup(bases, new Date('2026-11-28T02:59:00Z'))?.id, 'b');
    assert.equal(chooseBaseBackup(bases, new Date('2026-11-28T03:00:04Z'))?.id, 'c');
    assert.equal(chooseBaseBackup(bases, new Date('2026-11-28T01:00:00Z')), undefined);
    const files = [
      wal('000000010000000000000005.gz', '2026-11-28T02:50:00Z'),
      wal('000000010000000000000006.gz', '2026-11-28T03:00:02Z'),
      wal('000000010000000000000007.gz', '2026-11-28T03:10:00Z'),
      wal('000000010000000000000008.gz', '2026-11-28T03:20:00Z'),
      wal('000000010000000000000009.gz', '2026-11-28T03:30:00Z'),
      wal('00000001.history', '2026-11-28T01:00:00Z'),
    ];
    assert.deepEqual(walFilesFor(files, bases[1]!, new Date('2026-11-28T03:15:00Z')).map((f) => f.name), ['00000001.history', '000000010000000000000006.gz', '000000010000000000000007.gz', '000000010000000000000008.gz']);
    assert.deepEqual(walFilesFor(files, bases[1]!, new Date('2026-11-28T04:00:00Z')).map((f) => f.name).slice(-1), ['000000010000000000000009.gz'], 'past the last file: all of them');
  });
});
