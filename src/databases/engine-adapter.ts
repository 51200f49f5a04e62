// One database engine behind one small interface (like Kysely's dialects): its image setting, environment, data directory, port, URL and health probe.
import type { ExecResult } from '../runtime/engine.js';
import type { Greeting } from './greeting.js';
import type { WalArchiving } from './wal-archiving.js';
import type { ContainerCommand, DatabaseCredentials } from './container-command.js';

export type { ContainerCommand, DatabaseCredentials } from './container-command.js';

export const DATABASE_ENGINES = ['postgres', 'mysql', 'redis'] as const;
export type DatabaseEngineName = (typeof DATABASE_ENGINES)[number];

/** How a restore runs: `clean` replaces what the database holds; `cpus`, the CPU share of the container it runs in, when known. */
export interface RestoreOptions {
  readonly clean: boolean;
  readonly cpus?: number;
}

/**
 * The engine-specific part of a managed database. Adding an engine is adding one file with one of
 * these: nothing outside src/databases/ names an engine.
 */
export interface EngineAdapter {
  readonly engine: DatabaseEngineName;
  /** The setting that chooses its image (decisions §19), for messages. */
  readonly imageSetting: string;
  /** The TCP port it listens on inside its network. */
  readonly port: number;
  /** Where its data lives inside the container: the named volume is mounted there. */
  readonly dataDir: string;
  /** Credentials for a new database called `name`, with a freshly generated `password`. */
  credentials(name: string, password: string): DatabaseCredentials;
  /** The container's environment (the official image's contract). */
  environment(credentials: DatabaseCredentials): Record<string, string>;
  /** The container's command, when the image's default is not enough (undefined: the image's own). */
  command(credentials: DatabaseCredentials): readonly string[] | undefined;
  /** The connection URL of the database at `host`. */
  url(credentials: DatabaseCredentials, host: string): string;
  /** A command run inside the container that succeeds once it accepts logins over TCP. */
  probe(credentials: DatabaseCredentials): ContainerCommand;
  /** Whether the probe's result means ready. */
  ready(result: ExecResult): boolean;
  /**
   * Its opening exchange on its port, when it has one without side effects: readiness is then
   * read from the control plane at once instead of by an exec of the probe every poll.
   */
  readonly greeting?: Greeting;
  /** The engine's own dump tool writing the whole database to stdout (decisions §20). */
  dump(credentials: DatabaseCredentials): ContainerCommand;
  /**
   * How a dump goes back in: `stream` pipes it into `restore`'s stdin; `file` writes it to
   * `restoreFile` in a server started without its data (Redis loads an RDB file at start).
   */
  readonly restoreMode: 'stream' | 'file';
  /** The restore command reading a dump on stdin (see RestoreOptions). */
  restore(credentials: DatabaseCredentials, options: RestoreOptions): ContainerCommand;
  /** Where a `file` restore writes the dump, and the server command that then loads it. */
  readonly restoreFile?: string;
  restoreCommand?(credentials: DatabaseCredentials): readonly string[];
  /**
   * A `file` restore into a database's own volume: once a server run on `restoreCommand` has
   * loaded the file, the commands that make it the server's own data again (Redis: its append-only
   * file rewritten from it), run in order, then `adopted` polled until true.
   */
  adoptRestore?(credentials: DatabaseCredentials): readonly ContainerCommand[];
  adoption?(credentials: DatabaseCredentials): ContainerCommand;
  /** Whether the adoption's output says it ended; a string: it failed, and why. */
  adopted?(result: ExecResult): boolean | string;
  /** A command whose output tells what the database holds: its tables (and rows) or its keys. */
  inventory(credentials: DatabaseCredentials): ContainerCommand;
  /** The inventory command's output, read. */
  parseInventory(output: string): Inventory;
  /**
   * A dump that reads a snapshot another session holds (engines that can share one): the inventory
   * is then taken once, in the dump's own snapshot, while the dump runs (exact counts of what the
   * dump holds) instead of before and after it.
   */
  readonly snapshotDump?: SnapshotDump;
  /** Settings of a throwaway copy (verification): it is removed after its check, so nothing it writes needs to survive a crash. */
  throwaway?(credentials: DatabaseCredentials): { readonly env: Record<string, string>; readonly command: readonly string[] };
  /** The file extension of a decrypted dump (downloads). */
  readonly dumpExtension: string;
  /** Point-in-time recovery (`pitr`), for the engines that offer it. */
  readonly pointInTime?: WalArchiving;
}

/** What `SnapshotDump.open` prints on stderr before the snapshot's name, on a line of its own. */
export const SNAPSHOT_MARK = 'slipway-snapshot';

/**
 * A session (a client reading statements on stdin) that holds a transaction open and shares its
 * snapshot with a dump. Its stdout carries only the inventory's output (read once the session ended).
 */
export interface SnapshotDump {
  session(credentials: DatabaseCredentials): ContainerCommand;
  /** Opens the transaction and prints `SNAPSHOT_MARK <name>` on stderr (unbuffered, unlike a pipe's stdout). */
  readonly open: string;
  /** Prints the inventory as `parseInventory` reads it, in the transaction's snapshot. */
  readonly inventory: string;
  /** Ends the transaction. */
  readonly close: string;
  /** The dump to stdout, reading the data as of snapshot `name`. */
  dump(credentials: DatabaseCredentials, name: string): ContainerCommand;
}

/** What a database holds, compared between a source and its restored backup. */
export type Inventory = { readonly tables: Readonly<Record<string, number>> } | { readonly keys: number };

/** A name that is a DNS label, as an identifier SQL accepts without quoting. */
export const sqlIdentifier = (name: string): string => name.replace(/-/g, '_');

/** `name<TAB>count` lines (a count may be absent: then -1, present but not counted) as a table map. */
export function parseTableLines(output: string): Record<string, number> {
  const tables: Record<string, number> = {};
  for (const line of output.split('\n')) {
    const [name, count] = line.trim().split('\t');
    if (name === undefined || name === '') continue;
    tables[name] = count === undefined || count === '' ? -1 : Number(count);
  }
  return tables;
}
