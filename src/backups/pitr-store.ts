// The port where point-in-time recovery keeps its base backups, its archived log files and how far each database's log is archived (src/db/pitr-store.ts).

export interface BaseBackupRow {
  readonly id: string;
  readonly database_id: string;
  readonly destination_id: string;
  /** The object's key in its destination. */
  readonly location: string;
  /** The log file being written when it started: the first one a recovery from it needs. */
  readonly start_wal: string;
  readonly status: 'running' | 'succeeded' | 'failed';
  readonly size_bytes: number | null;
  readonly sha256: string | null;
  readonly runner: string | null;
  readonly error: string | null;
  readonly started_at: string;
  /** When it ended: the earliest moment it can be recovered to. */
  readonly finished_at: string | null;
}

/** A write-ahead log file in a destination. */
export interface WalFileRow {
  readonly database_id: string;
  /** As the receiver named it (`000000010000000000000003.gz`, `00000002.history`). */
  readonly name: string;
  readonly destination_id: string;
  readonly location: string;
  /** When the receiver closed it: every commit before is in it or in an earlier file. */
  readonly closed_at: string;
  readonly size_bytes: number;
  readonly sha256: string;
  readonly uploaded_at: string;
}

export interface PitrStore {
  addBase(row: BaseBackupRow): Promise<void>;
  updateBase(id: string, changes: Partial<Pick<BaseBackupRow, 'status' | 'size_bytes' | 'sha256' | 'runner' | 'error' | 'finished_at'>>): Promise<void>;
  getBase(id: string): Promise<BaseBackupRow | undefined>;
  /** The database's base backups, oldest first. */
  bases(databaseId: string): Promise<BaseBackupRow[]>;
  removeBase(id: string): Promise<void>;
  /** Records an archived file (one recorded already is kept as it is). */
  addWal(row: WalFileRow): Promise<void>;
  /** The database's archived files, by name. */
  walFiles(databaseId: string): Promise<WalFileRow[]>;
  removeWal(databaseId: string, name: string): Promise<void>;
  /** Every write committed before `at` is in the destination. */
  setArchivedUntil(databaseId: string, at: string | null, error: string | null): Promise<void>;
  state(databaseId: string): Promise<{ archived_until: string | null; error: string | null; updated_at: string } | undefined>;
}
