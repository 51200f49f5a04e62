// Scheduled self-backups (contract §25): taken on the leader only, on the cron schedule, the newest 14 kept; the settings are checked at start.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.js';
import { Background, type Leadership } from '../../src/core/background.js';
import { localObjectStore } from '../../src/backups/local-object-store.js';
import { listSelfBackups, SELF_BACKUP_FOLDER } from '../../src/operate/self-backup-destination.js';
import { scheduledBackups, selfBackupCron, selfBackupTask, takeScheduledBackup } from '../../src/operate/self-backup-schedule.js';

function leadership(initial: boolean): Leadership & { set(leader: boolean): void } {
  let leader = initial;
  const listeners = new Set<(leader: boolean) => void>();
  return {
    isLeader: () => leader,
    onLeadership: (listener) => {
      listeners.add(listener);
      listener(leader);
      return () => listeners.delete(listener);
    },
    set(value) {
      leader = value;
      for (const l of listeners) l(value);
    },
  };
}

const write = async (out: NodeJS.WritableStream): Promise<void> => {
  await new Promise<void>((resolve, reject) => out.end('backup bytes', () => resolve()).on('error', reject));
};

test('each backup lands whole in the directory, and only the newest 14 are kept', async () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-scheduled-'));
  try {
    const deps = { settings: { schedule: '0 3 * * *', directory, keep: 14 }, take: write, log: () => undefined };
    fs.writeFileSync(path.join(directory, 'unrelated.txt'), 'kept');
    for (let day = 1; day <= 16; day++) await takeScheduledBackup(deps, new Date(Date.UTC(2026, 10, day, 3)));
    const kept = await scheduledBackups(directory);
    assert.equal(kept.length, 14);
    assert.match(kept[0] ?? '', /2026-11-03T03-00-00-000Z/);
    assert.ok(fs.existsSync(path.join(directory, 'unrelated.txt')));
    assert.equal(fs.statSync(path.join(directory, kept[0] ?? '')).mode & 0o777, 0o600);
    // A failed backup leaves no partial file behind.
    await assert.rejects(takeScheduledBackup({ ...deps, take: async () => { throw new Error('disk full'); } }, new Date(Date.UTC(2026, 10, 20))), /disk full/);
    assert.deepEqual(fs.readdirSync(directory).filter((n) => n.endsWith('.partial')), []);
  } finally {
    fs.rmSync(directory, { recursive: true, force: true });
  }
});

test('into a backup destination: each backup one object under slipway-self-backups/, the newest 14 kept, a failed one leaves nothing', async () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-scheduled-dest-'));
  try {
    const objects = localObjectStore(directory);
    const deps = { settings: { schedule: '0 3 * * *', destination: 'offsite', keep: 14 }, take: write, log: () => undefined, destination: async () => objects };
    for (let day = 1; day <= 16; day++) await takeScheduledBackup(deps, new Date(Date.UTC(2026, 10, day, 3)));
    const kept = await listSelfBackups(objects, AbortSignal.timeout(5000));
    assert.equal(kept.length, 14);
    assert.match(kept[0] ?? '', /2026-11-03T03-00-00-000Z/);
    assert.equal(fs.readFileSync(path.join(directory, SELF_BACKUP_FOLDER, kept[13] ?? ''), 'utf8'), 'backup bytes');
    await assert.rejects(takeScheduledBackup({ ...deps, take: async () => { throw new Error('disk full'); } }, new Date(Date.UTC(2026, 10, 20))), /disk full/);
    assert.equal((await listSelfBackups(objects, AbortSignal.timeout(5000))).length, 14);
    assert.deepEqual(fs.readdirSync(path.join(directory, SELF_BACKUP_FOLDER)).filter((n) => !n.startsWith('slipway-self-backup-2026-11-')), []);
  } finally {
    fs.rmSync(directory, { recursive: true, force: true });
  }
});

test('the task runs on the leader only, on its schedule, and stops with leadership', async () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-scheduled-'));
  const leader = leadership(false);
  const background = new Background(leader, () => undefined);
  let taken = 0;
  background.add(selfBackupTask({ settings: { schedule: '* * * * * *', directory, keep: 14 }, take: async (out) => { taken++; await write(out); }, log: () => undefined }));
  background.start();
  try {
    await sleep(1500);
    assert.equal(taken, 0, 'not the leader: no backup');
    leader.set(true);
    const deadline = Date.now() + 5000;
    while (taken === 0 && Date.now() < deadline) await sleep(50);
    assert.ok(taken >= 1, 'the leader took one');
    leader.set(false);
    await sleep(100);
    const after = taken;
    await sleep(1500);
    assert.equal(taken, after, 'no more once leadership is lost');
  } finally {
    await background.stop();
    fs.rmSync(directory, { recursive: true, force: true });
  }
});

test('the settings: both or neither, a cron expression, an absolute directory or a destination', () => {
  assert.equal(loadConfig({}).selfBackup, undefined);
  assert.deepEqual(loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: ' 0 3  * * * ', SLIPWAY_SELF_BACKUP_DESTINATION: '/backups' }).selfBackup, { schedule: '0 3 * * *', directory: '/backups', keep: 14 });
  assert.throws(() => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '0 3 * * *' }), /set together/);
  assert.throws(() => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: 'daily', SLIPWAY_SELF_BACKUP_DESTINATION: '/b' }), /cron expression/);
  assert.throws(() => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '99 3 * * *', SLIPWAY_SELF_BACKUP_DESTINATION: '/b' }), /cron expression/);
  assert.throws(() => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '@reboot', SLIPWAY_SELF_BACKUP_DESTINATION: '/b' }), /cron expression/);
  assert.throws(() => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '0 0 30 2 *', SLIPWAY_SELF_BACKUP_DESTINATION: '/b' }), /never comes due/);
  // A destination's name as the API allows it (contract §20 gives no rule): case and spaces kept; an id lower-cased.
  assert.deepEqual(loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '0 3 * * *', SLIPWAY_SELF_BACKUP_DESTINATION: 'Offsite' }).selfBackup, { schedule: '0 3 * * *', destination: 'Offsite', keep: 14 });
  assert.deepEqual(loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '0 3 * * *', SLIPWAY_SELF_BACKUP_DESTINATION: ' Offsite S3 ' }).selfBackup, { schedule: '0 3 * * *', destination: 'Offsite S3', keep: 14 });
  assert.deepEqual(loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '0 3 * * *', SLIPWAY_SELF_BACKUP_DESTINATION: '8A0C8F4E-4D0B-4A55-9D43-0D2C6A1B7E01' }).selfBackup, { schedule: '0 3 * * *', destination: '8a0c8f4e-4d0b-4a55-9d43-0d2c6a1b7e01', keep: 14 });
  assert.throws(() => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '0 3 * * *', SLIPWAY_SELF_BACKUP_DESTINATION: 'x'.repeat(101) }), /id or name, or an absolute directory path/);
  assert.throws(() => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: '0 3 * * *', SLIPWAY_SELF_BACKUP_DESTINATION: 'backups/self' }), /id or name, or an absolute directory path/);
});

test("the schedule takes the forms a job's does (contract §25 \"(cron)\", §22): 5 or 6 fields, @hourly, @daily, @weekly, @monthly; the scheduler's due times, in UTC", () => {
  const settings = (schedule: string) => loadConfig({ SLIPWAY_SELF_BACKUP_SCHEDULE: schedule, SLIPWAY_SELF_BACKUP_DESTINATION: '/backups' }).selfBackup;
  const after = new Date('2026-11-28T10:20:00.000Z'); // a Saturday
  for (const [schedule, read, next] of [
    ['@hourly', '@hourly', '2026-11-28T11:00:00.000Z'],
    ['@daily', '@daily', '2026-11-29T00:00:00.000Z'],
    [' @Weekly ', '@weekly', '2026-11-29T00:00:00.000Z'],
    ['@monthly', '@monthly', '2026-12-01T00:00:00.000Z'],
    ['30 3 * * *', '30 3 * * *', '2026-11-29T03:30:00.000Z'],
    ['*/30 * * * * *', '*/30 * * * * *', '2026-11-28T10:20:30.000Z'],
  ] as const) {
    const read_ = settings(schedule);
    assert.deepEqual(read_, { schedule: read, directory: '/backups', keep: 14 }, schedule);
    const cron = selfBackupCron(read_!.schedule);
    assert.equal(cron.nextRun(after)?.toISOString(), next, schedule);
    cron.stop();
  }
});

