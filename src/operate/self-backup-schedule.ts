// Scheduled self-backups: a leader-only background task that takes one on a cron schedule into a directory or a backup destination and keeps the newest 14.
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { Cron } from 'croner';
import type { BackgroundTask } from '../core/background.js';
import type { Config, SelfBackupSettings } from '../config.js';
import { loadInstallationKey } from '../secrets/installation-key.js';
import { VERSION } from '../version.js';
import type { ObjectStore } from '../backups/object-store.js';
import type { Db } from '../db/database.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { fileSink } from './file-sink.js';
import { takeSelfBackup } from './self-backup.js';
import { isSelfBackupName, openSelfBackupDestination, pruneSelfBackups, putSelfBackup, selfBackupName } from './self-backup-destination.js';

/** Time one scheduled backup into a destination may take. */
const DESTINATION_TIMEOUT_MS = 6 * 3_600_000;

export interface SelfBackupScheduleDeps {
  readonly settings: SelfBackupSettings;
  /** Writes one backup to `out` (takeSelfBackup with this installation's settings). */
  readonly take: (out: Writable) => Promise<unknown>;
  readonly log: (level: 'info' | 'warn', msg: string, detail?: object) => void;
  /** With `settings.destination`: opens it (looked up at each backup: it may have been changed). */
  readonly destination?: () => Promise<ObjectStore>;
}

/** The backups of the directory, oldest first. */
export async function scheduledBackups(directory: string): Promise<string[]> {
  const names = await fsp.readdir(directory).catch(() => [] as string[]);
  return names.filter(isSelfBackupName).sort();
}

/** Takes one backup into the directory (a .partial renamed when whole), then removes all but the newest `keep`. */
export async function takeScheduledBackup(deps: SelfBackupScheduleDeps, at: Date = new Date()): Promise<string> {
  const { directory, keep } = deps.settings;
  if (directory === undefined) {
    if (deps.destination === undefined) throw new Error('no destination to write the backup to');
    const signal = AbortSignal.timeout(DESTINATION_TIMEOUT_MS);
    const objects = await deps.destination();
    const name = selfBackupName(at);
    await putSelfBackup(objects, name, deps.take, signal);
    await pruneSelfBackups(objects, keep, signal);
    return `${objects.describe}: ${name}`;
  }
  await fsp.mkdir(directory, { recursive: true, mode: 0o700 });
  const file = path.join(directory, selfBackupName(at));
  const partial = `${file}.partial`;
  // Opened before the backup starts (a stream opens its file later, after a quick failure's clean-up could run).
  const handle = await fsp.open(partial, 'wx', 0o600);
  const out = fileSink(handle.fd, { closeFd: false });
  try {
    await deps.take(out);
    await handle.close();
    await fsp.rename(partial, file);
  } catch (err) {
    if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()).destroy());
    await handle.close().catch(() => undefined);
    await fsp.rm(partial, { force: true });
    throw err;
  }
  const all = await scheduledBackups(directory);
  for (const old of all.slice(0, Math.max(0, all.length - keep))) await fsp.rm(path.join(directory, old), { force: true });
  return file;
}

/**
 * The cron job of a schedule as the config checked it (5 or 6 fields, or @hourly, @daily, @weekly,
 * @monthly, which croner reads itself): in UTC, never two rounds at once; paused without `round`.
 */
export function selfBackupCron(schedule: string, round?: () => Promise<void>): Cron {
  return round === undefined ? new Cron(schedule, { timezone: 'UTC', paused: true }) : new Cron(schedule, { timezone: 'UTC', protect: true }, round);
}

/**
 * The task: while this instance leads, a cron job (UTC, never two rounds at once) takes a backup;
 * losing leadership or stopping aborts the signal, which stops the job. A failed backup is logged
 * as a warning with its reason and tried again at the next time the schedule gives.
 */
export function selfBackupTask(deps: SelfBackupScheduleDeps): BackgroundTask {
  return {
    name: 'scheduled self-backup',
    scope: 'leaderOnly',
    run(signal) {
      const job = selfBackupCron(deps.settings.schedule, async () => {
        try {
          const file = await takeScheduledBackup(deps);
          deps.log('info', `self-backup written to ${file}`);
        } catch (err) {
          deps.log('warn', `the scheduled self-backup into ${deps.settings.directory ?? `backup destination "${deps.settings.destination ?? ''}"`} failed`, { err });
        }
      });
      signal.addEventListener('abort', () => job.stop(), { once: true });
    },
  };
}

/** The scheduled self-backup task of this installation, or undefined when none is configured. */
export function scheduledSelfBackups(config: Config, log: SelfBackupScheduleDeps['log'], database: { db: Db; cipher: ValueCipher }): BackgroundTask | undefined {
  const settings = config.selfBackup;
  if (settings === undefined) return undefined;
  const take = (out: Writable): Promise<unknown> =>
    takeSelfBackup({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, installationKey: loadInstallationKey(config.secretKey, config.dataDir).key, version: VERSION }, out);
  const reference = settings.destination;
  const destination =
    reference === undefined
      ? undefined
      : async (): Promise<ObjectStore> => (await openSelfBackupDestination({ ...database, dataDir: config.dataDir, allowPrivateTargets: config.allowPrivateTargets }, reference)).objects;
  return selfBackupTask({ settings, take, log, ...(destination === undefined ? {} : { destination }) });
}
