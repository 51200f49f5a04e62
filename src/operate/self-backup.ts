// `slipway server backup`: a consistent, encrypted snapshot of Slipway's own state (database, uploaded sources, build logs), never its key.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable, type Writable } from 'node:stream';
import SQLite from 'better-sqlite3';
import * as tar from 'tar';
import { encryptingStream, newHeader, type SelfBackupHeader } from './backup-format.js';
import { exportPostgres } from './postgres-export.js';
import { pinFileSnapshot, type FileSnapshot } from './sqlite-file-snapshot.js';

/** The directories of the data directory a backup carries beside the database (the key, locks, work and caches stay out). */
export const BACKED_UP_DIRS = ['uploads', 'logs'] as const;
/** The payload's names for the database: SQLite's file, or PostgreSQL's logical export. */
export const SQLITE_ENTRY = 'slipway.db';
export const POSTGRES_ENTRY = 'postgres.jsonl';
/** sqlite3_backup_step's page count for "every remaining page". */
const ALL_PAGES = 0x7fffffff;

export interface SelfBackupSource {
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly installationKey: Buffer;
  readonly version: string;
}

/** The newest migration a SQLite database has run ('' for none). */
function schemaOf(db: SQLite.Database): string {
  const row = db.prepare('select max(name) as name from kysely_migration').get() as { name: string | null } | undefined;
  return row?.name ?? '';
}

/** Tries at pinning the database file before copying it through SQLite instead. */
const PIN_ATTEMPTS = 3;
/** A SQLite database up to this size (file and WAL) is snapshotted into memory rather than into a staging file. */
const IN_MEMORY_MAX_BYTES = 128 * 1024 * 1024;
/** Slices of an in-memory snapshot handed to the encryption: it seals a few frames at a time. */
const SLICE_BYTES = 4 * 1024 * 1024;

const sizeOf = (file: string): number => (fs.existsSync(file) ? fs.statSync(file).size : 0);

/** The SQLite snapshot: its schema and where its bytes come from (the pinned file, memory, or the staging copy); `close` ends it. */
interface SqliteSnapshot {
  readonly schema: string;
  readonly pinned: FileSnapshot | undefined;
  readonly inMemory: Buffer | undefined;
  close(): void;
}

/**
 * A consistent copy of the SQLite database. First choice: the database file itself, pinned by a
 * read transaction and read in small pieces while the backup is written (sqlite-file-snapshot.ts;
 * no copy of the database in memory or on disk). Else, in memory (sqlite3_serialize, in one read
 * transaction) when it is small enough, else through the online backup API into `staging` (all
 * pages in one step, in one read transaction: in WAL mode writers go on meanwhile, and the copy
 * never restarts, whereas stepping 100 pages at a time, the default, starts over whenever the
 * server writes between two steps).
 */
async function snapshotSqlite(file: string, staging: string): Promise<SqliteSnapshot> {
  const live = new SQLite(file, { fileMustExist: true });
  const close = (): void => {
    if (live.open) live.close();
  };
  try {
    live.pragma('busy_timeout = 5000');
    // A server committing between the checkpoint and the pin spoils a try; a few tries, then the copies below.
    for (let attempt = 0; attempt < PIN_ATTEMPTS; attempt++) {
      const pin = pinFileSnapshot(live, file, () => schemaOf(live));
      if (pin !== undefined) {
        return { schema: pin.value, pinned: pin.snapshot, inMemory: undefined, close: () => { pin.snapshot.release(); close(); } };
      }
    }
    if (sizeOf(file) + sizeOf(`${file}-wal`) <= IN_MEMORY_MAX_BYTES) {
      // One read transaction for both: the schema named is the copy's.
      const snapshot = live.transaction(() => ({ schema: schemaOf(live), inMemory: live.serialize() }));
      return { ...snapshot.deferred(), pinned: undefined, close };
    }
    await live.backup(path.join(staging, SQLITE_ENTRY), { progress: () => ALL_PAGES });
  } catch (err) {
    close();
    throw err;
  }
  close();
  const copy = new SQLite(path.join(staging, SQLITE_ENTRY), { readonly: true, fileMustExist: true });
  try {
    return { schema: schemaOf(copy), pinned: undefined, inMemory: undefined, close: () => undefined };
  } finally {
    copy.close();
  }
}

/** The database's tar entry: header, bytes, padding to the 512-byte block. */
async function* sqliteEntry(size: number, bytes: AsyncIterable<Buffer> | Iterable<Buffer>): AsyncGenerator<Buffer> {
  const block = Buffer.alloc(512);
  new tar.Header({ path: SQLITE_ENTRY, mode: 0o600, size, mtime: new Date(), type: 'File' }).encode(block, 0);
  yield block;
  yield* bytes;
  const padding = (512 - (size % 512)) % 512;
  if (padding > 0) yield Buffer.alloc(padding);
}

function* slices(inMemory: Buffer): Generator<Buffer> {
  for (let at = 0; at < inMemory.length; at += SLICE_BYTES) yield inMemory.subarray(at, at + SLICE_BYTES);
}

/** The tar stream of the payload: the pinned or in-memory database as its first entry (if any), then `entries` of `staging` read by tar. */
function payload(staging: string, entries: string[], snapshot: SqliteSnapshot | undefined): NodeJS.ReadableStream {
  const files = (): NodeJS.ReadableStream => tar.c({ cwd: staging, portable: true, follow: true }, entries) as unknown as NodeJS.ReadableStream;
  const first = snapshot?.pinned !== undefined ? sqliteEntry(snapshot.pinned.size, snapshot.pinned.pieces()) : snapshot?.inMemory !== undefined ? sqliteEntry(snapshot.inMemory.length, slices(snapshot.inMemory)) : undefined;
  if (first === undefined) return files();
  return Readable.from(
    (async function* () {
      yield* first;
      // The pinned snapshot is read whole: its read transaction ends before the directories are read.
      snapshot?.close();
      // The rest of the archive: tar's own, which ends it; or, with nothing else, the two zero blocks that end one.
      if (entries.length > 0) yield* files() as AsyncIterable<Buffer>;
      else yield Buffer.alloc(1024);
    })(),
    { objectMode: false },
  );
}

/**
 * Writes a backup of the installation to `out` while the server may be running. SQLite: a
 * consistent snapshot held by one read transaction (snapshotSqlite); PostgreSQL: every table read
 * in one REPEATABLE READ transaction (postgres-export.ts). Resolves with the header written.
 */
export async function takeSelfBackup(source: SelfBackupSource, out: Writable): Promise<SelfBackupHeader> {
  const staging = await fsp.mkdtemp(path.join(os.tmpdir(), 'slipway-self-backup-'));
  let snapshot: SqliteSnapshot | undefined;
  try {
    await fsp.chmod(staging, 0o700);
    let schema: string;
    let database: SelfBackupHeader['database'];
    const entries: string[] = [];
    if (source.databaseUrl === undefined) {
      const file = path.join(source.dataDir, SQLITE_ENTRY);
      if (!fs.existsSync(file)) throw new Error(`no installation in ${source.dataDir} (no slipway.db): nothing to back up`);
      snapshot = await snapshotSqlite(file, staging);
      schema = snapshot.schema;
      if (snapshot.pinned === undefined && snapshot.inMemory === undefined) entries.push(SQLITE_ENTRY);
      database = 'sqlite';
    } else {
      schema = await exportPostgres(source.databaseUrl, path.join(staging, POSTGRES_ENTRY));
      entries.push(POSTGRES_ENTRY);
      database = 'postgres';
    }
    // The directories go in through links: tar follows them, so the archive holds their contents under these names.
    // Not gzipped: compressing costs more time than the backup itself (bench: 60 MB, 7 s vs 1 s on a loaded host), and most of the
    // payload (uploads) is compressed already.
    for (const dir of BACKED_UP_DIRS) {
      const from = path.join(source.dataDir, dir);
      if (!fs.existsSync(from)) continue;
      await fsp.symlink(from, path.join(staging, dir), 'dir');
      entries.push(dir);
    }
    const { header, key } = newHeader(source.installationKey, { version: source.version, schema, database });
    await pipeline(payload(staging, entries, snapshot), encryptingStream(header, key), out);
    return header;
  } finally {
    snapshot?.close();
    await fsp.rm(staging, { recursive: true, force: true });
  }
}
