// The backups part of the server, built in one call from what main.ts has: the context the API uses, the schedules' background task, shutdown.
import type { Config } from '../config.js';
import type { Part } from '../core/parts.js';
import type { DatabasesContext } from '../databases/database-context.js';
import type { AppEvents } from '../domain/app-events.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import type { BackupStore } from './backup-store.js';
import { BACKUP_KEY_INFO } from './backup-stream.js';
import { BackupWork } from './backup-work.js';
import type { BackupsContext } from './backups-context.js';
import { scheduleTask } from './scheduler.js';
import type { BackgroundTask } from '../core/background.js';
import type { PitrStore } from './pitr-store.js';
import { WalArchiver, walArchiveTask } from './wal-archiver.js';

export interface BackupsPart {
  readonly context: BackupsContext;
  /** The leader's round of scheduled backups, lost ones and retention. */
  readonly task: BackgroundTask;
  /** The leader's round of point-in-time recovery: log receivers, archived log, base backups. */
  readonly walTask: BackgroundTask;
}

export async function backupsPart(options: {
  readonly stores: { readonly backups: BackupStore; readonly pitr: PitrStore };
  readonly databases: DatabasesContext;
  readonly config: Config;
  readonly cipher: ValueCipher;
  readonly runner: string;
  readonly events: Pick<AppEvents, 'emit'>;
  readonly restartApp: BackupsContext['restartApp'];
  /** The ids of the live instances (a backup running on another one is lost when it is not among them). */
  readonly liveIds: () => Promise<string[]>;
}): Promise<Part<BackupsPart>> {
  const context: BackupsContext = {
    store: options.stores.backups,
    pitr: options.stores.pitr,
    databases: options.databases,
    dataDir: options.config.dataDir,
    allowPrivateTargets: options.config.allowPrivateTargets,
    streamKey: options.cipher.deriveKey(BACKUP_KEY_INFO),
    runner: options.runner,
    events: options.events,
    work: new BackupWork(),
    log: options.databases.log,
    restartApp: options.restartApp,
  };
  return { offers: { context, task: scheduleTask(context, options.liveIds), walTask: walArchiveTask(new WalArchiver(context), options.config.pitrRoundSeconds * 1000) }, stop: () => context.work.close() };
}
