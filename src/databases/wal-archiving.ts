// What an engine offers for point-in-time recovery (decisions §20, `pitr`): commands to make its server stream its write-ahead log, receive it in a companion, take a base backup and recover to a moment.
import type { ContainerCommand, DatabaseCredentials } from './container-command.js';

/** A command with SQL fed on its stdin (secrets stay out of argv). */
export interface ScriptCommand extends ContainerCommand {
  readonly stdin: string;
}

export interface WalArchiving {
  /** Run in the database's container: lets the companion stream the log (a replication rule, a slot); idempotent. */
  prepare(credentials: DatabaseCredentials): ScriptCommand;
  /** Run in the database's container: drops the slot (pitr turned off: the server no longer keeps log for it). */
  dropSlot(credentials: DatabaseCredentials): ScriptCommand;
  /** The companion's command: receives the log from `host` into `dir`, reconnecting by itself. */
  receive(credentials: DatabaseCredentials, host: string, dir: string): ContainerCommand;
  /**
   * Run in the database's container: closes the current log file when anything was written to it
   * (so a commit is archived within one round). Prints `switched` or `idle`.
   */
  switchLog(credentials: DatabaseCredentials): ContainerCommand;
  /** Run in the database's container: prints the name of the log file now being written. */
  currentLog(credentials: DatabaseCredentials): ContainerCommand;
  /** Run in the database's container: a base backup as one tar stream on stdout (its log comes from the archive). */
  baseBackup(credentials: DatabaseCredentials): ContainerCommand;
  /** Whether a file name the receiver wrote is a completed log file or history file (not `.partial`). */
  completed(fileName: string): boolean;
  /** The name a completed file is restored under (its compression suffix removed) and whether it is gzip-compressed. */
  restoredName(fileName: string): { name: string; gzip: boolean };
  /** The image's own user, owner of the data directory: the companion and the restore's helper run as it. */
  readonly user: string;
  /** The data directory under the volume's mount point (PGDATA). */
  readonly dataSubdir: string;
  /**
   * The server's command recovering the restored base backup with the log staged in `stagingDir`,
   * up to `at` (undefined: to the end of the staged log), then promoting.
   */
  recover(stagingDir: string, at: Date | undefined): readonly string[];
  /** The marker file a recovery needs in the data directory. */
  readonly recoverySignal: string;
  /** Prints `f` once the recovered server accepts writes (socket only, no password). */
  recovered(credentials: DatabaseCredentials): ContainerCommand;
  /** Run after recovery: the source's database renamed to the new one's, its password set to the new one's. */
  adopt(sourceDatabase: string, credentials: DatabaseCredentials): ScriptCommand;
  /** A line of the recovering server's output that means the target lies beyond the staged log. */
  readonly targetBeyondLog: RegExp;
}
