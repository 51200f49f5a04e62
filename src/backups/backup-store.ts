// The port where backup destinations (their secret encrypted), backup records and schedules are kept (src/db/backup-store.ts).
import type { AuditRecord } from '../domain/audit.js';
import type { DatabaseEngineName, Inventory } from '../databases/engine-adapter.js';

export const DESTINATION_TYPES = ['s3', 'local'] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];

/** The settings of an S3 destination that are not secret. */
export interface S3Settings {
  readonly endpoint: string;
  readonly region: string;
  readonly bucket: string;
  /** Prepended to every object's key ('' or ending in '/'). */
  readonly prefix: string;
  readonly access_key_id: string;
  readonly force_path_style: boolean;
}

/** A destination as stored (its secret apart, encrypted). `settings` is null for `local`. */
export interface DestinationRow {
  readonly id: string;
  readonly seq: number;
  readonly name: string;
  readonly type: DestinationType;
  readonly user_id: string;
  readonly team_id: string | null;
  readonly settings: S3Settings | null;
  readonly created_at: string;
  readonly updated_at: string;
}

export const BACKUP_STATUSES = ['running', 'succeeded', 'verified', 'failed'] as const;
export type BackupStatus = (typeof BACKUP_STATUSES)[number];
export type BackupTrigger = 'manual' | 'schedule' | 'safety';

/** What a database held just before and just after its dump (each table's rows, or its key count): the restored copy must match one of them or lie between. */
export type SourceCounts = readonly Inventory[];

export interface BackupRow {
  readonly id: string;
  readonly seq: number;
  readonly database_id: string;
  readonly database_name: string;
  readonly engine: DatabaseEngineName;
  readonly image: string;
  readonly user_id: string;
  readonly team_id: string | null;
  readonly destination_id: string;
  readonly status: BackupStatus;
  readonly trigger: BackupTrigger;
  readonly size_bytes: number | null;
  readonly sha256: string | null;
  /** The object's key in its destination. */
  readonly location: string;
  readonly source_counts: SourceCounts | null;
  /** The instance taking it while `running`. */
  readonly runner: string | null;
  /** The schedule's due time it was taken for (scheduled backups). */
  readonly due_at: string | null;
  readonly started_at: string;
  readonly finished_at: string | null;
  readonly verified_at: string | null;
  readonly error: string | null;
}

export type BackupChanges = Partial<Pick<BackupRow, 'status' | 'size_bytes' | 'sha256' | 'source_counts' | 'finished_at' | 'verified_at' | 'error' | 'runner'>>;

/** A database's backup schedule. */
export interface BackupSchedule {
  readonly database_id: string;
  readonly schedule: string;
  readonly destination_id: string;
  readonly keep: number;
  readonly pitr: boolean;
  /** When it was last set: the reference for its first due time. */
  readonly updated_at?: string;
}

/** A restore of a backup, in place (`target_database_id` = `database_id`) or into a new database. */
export interface RestoreRow {
  readonly id: string;
  readonly database_id: string;
  readonly backup_id: string;
  readonly target_database_id: string;
  readonly safety_backup_id: string | null;
  readonly status: 'running' | 'succeeded' | 'failed';
  readonly error: string | null;
  readonly started_at: string;
  readonly finished_at: string | null;
}

export interface BackupStore {
  /** `name_taken` when its owner has a destination of that name. */
  createDestination(row: Omit<DestinationRow, 'seq'>, secret: string | null, audit: AuditRecord): Promise<'created' | 'name_taken'>;
  getDestination(id: string): Promise<DestinationRow | undefined>;
  /** The destination's secret, decrypted (null for `local`). */
  destinationSecret(id: string): Promise<string | null>;
  listDestinations(userId: string, teamIds: readonly string[], before: number | undefined, limit: number): Promise<DestinationRow[]>;
  /** `secret` undefined: unchanged. */
  updateDestination(id: string, changes: { name?: string; settings?: S3Settings }, secret: string | undefined, audit: AuditRecord): Promise<'updated' | 'name_taken' | 'gone'>;
  removeDestination(id: string, audit: AuditRecord): Promise<void>;
  /** The databases whose schedule uses the destination, by name. */
  schedulesUsing(destinationId: string): Promise<Array<{ database_id: string; database_name: string }>>;
  /** Whether any backup record points at it. */
  backupsIn(destinationId: string): Promise<number>;

  /** Records a backup; `due_taken` when a scheduled one for the same (database, due time) exists already. */
  createBackup(row: Omit<BackupRow, 'seq'>, audit?: AuditRecord): Promise<'created' | 'due_taken'>;
  getBackup(id: string): Promise<BackupRow | undefined>;
  /** Up to `limit` backups of a database with `seq` below `before`, newest first. */
  listBackups(databaseId: string, before: number | undefined, limit: number): Promise<BackupRow[]>;
  updateBackup(id: string, changes: BackupChanges): Promise<void>;
  removeBackup(id: string, audit?: AuditRecord): Promise<void>;
  /** Backups `running` on one of `runners` (instances that are gone). */
  runningOn(runners: readonly string[]): Promise<BackupRow[]>;
  /** Every backup running anywhere, or being verified (`succeeded` with a runner), to compare with the live instances. */
  allRunning(): Promise<BackupRow[]>;
  /** The latest due time a scheduled backup of the database was recorded for. */
  lastDue(databaseId: string): Promise<string | undefined>;
  /** Frees a backup's due time (one lost with its instance: the schedule takes it again). */
  releaseDue(id: string): Promise<void>;
  /** The database's verified backups, newest first. */
  verifiedBackups(databaseId: string): Promise<BackupRow[]>;

  /** With `audit` (as createBackup, removeBackup and setSchedule), its entry is appended in the same transaction. */
  createRestore(row: RestoreRow, audit?: AuditRecord): Promise<void>;
  updateRestore(id: string, changes: Partial<Pick<RestoreRow, 'status' | 'error' | 'finished_at' | 'safety_backup_id'>>): Promise<void>;
  getRestore(id: string): Promise<RestoreRow | undefined>;

  getSchedule(databaseId: string): Promise<BackupSchedule | undefined>;
  setSchedule(schedule: BackupSchedule | { database_id: string; remove: true }, audit?: AuditRecord): Promise<void>;
  allSchedules(): Promise<BackupSchedule[]>;
  /** The schedules of these databases (a page of the list), those that have one. */
  schedulesOf(databaseIds: readonly string[]): Promise<BackupSchedule[]>;
}
