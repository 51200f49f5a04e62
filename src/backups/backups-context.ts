// What the backup use-cases are handed: their store, the managed databases' context, the stream key, the events port and the work running here.
import type { DatabasesContext } from '../databases/database-context.js';
import type { Principal } from '../core/principal.js';
import type { AppEvents } from '../domain/app-events.js';
import type { BackupStore } from './backup-store.js';
import type { BackupWork } from './backup-work.js';
import type { PitrStore } from './pitr-store.js';

export interface BackupsContext {
  readonly store: BackupStore;
  /** Point-in-time recovery's base backups, archived log files and how far each log is archived. */
  readonly pitr: PitrStore;
  readonly databases: DatabasesContext;
  /** SLIPWAY_DATA_DIR: where `local` destinations keep their objects. */
  readonly dataDir: string;
  /** SLIPWAY_ALLOW_PRIVATE_TARGETS. */
  readonly allowPrivateTargets: boolean;
  /** The key backups are encrypted under (HKDF of the installation key, see backup-stream.ts). */
  readonly streamKey: Buffer;
  /** This instance's id (a running backup's `runner`). */
  readonly runner: string;
  readonly events: Pick<AppEvents, 'emit'>;
  /** Backups, verifications and restores running in the background here. */
  readonly work: BackupWork;
  readonly log: DatabasesContext['log'];
  /** Restarts a deployment as `principal` (apps linked to a database whose data a restore replaced). */
  readonly restartApp: (principal: Principal, deploymentId: string) => Promise<unknown>;
}
