// `slipway server backup`: a consistent, encrypted snapshot of Slipway's own state (database, uploaded sources, build logs), never its key.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Writable } from 'node:stream';
import SQLite from 'better-sqlite3';
import * as tar from 'tar';
import { encryptingStream, newHeader, type SelfBackupHeader } from './backup-format.js';
import { exportPostgres } from './postgres-export.js';

/** The directories of the data directory a backup carries beside the database (the key, locks, work and caches stay out). */
export const BACKED_UP_DIRS = ['uploads', 'logs'] as const;
/** The payload's names for the database: SQLite's file, or PostgreSQL's logical export. */
export const SQLITE_ENTRY = 'slipway.db';
export const POSTGRES_ENTRY = 'postgres.jsonl';

export interface SelfBackupSource {
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly installationKey: Buffer;
  readonly version: string;
}

/** The newest migration a SQLite database has run ('' for none). */
function sqliteSchema(file: string): string {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare('select max(name) as name from kysely_migration').get() as { name: string | null } | undefined;
    return row?.name ?? '';
  } finally {
    db.close();
  }
}

/**
 * Writes a backup of the installation to `out` while the server may be running. SQLite: the online
 * backup API copies a consistent snapshot page by page (writers are not blocked for long);
 * PostgreSQL: every table read in one REPEATABLE READ transaction (postgres-export.ts). Resolves
 * with the header written.
 */
export async function takeSelfBackup(source: SelfBackupSource, out: Writable): Promise<SelfBackupHeader> {
  const staging = await fsp.mkdtemp(path.join(os.tmpdir(), 'slipway-self-backup-'));
  try {
    await fsp.chmod(staging, 0o700);
    let schema: string;
    let database: SelfBackupHeader['database'];
    if (source.databaseUrl === undefined) {
      const file = path.join(source.dataDir, 'slipway.db');
      if (!fs.existsSync(file)) throw new Error(`no installation in ${source.dataDir} (no slipway.db): nothing to back up`);
      const live = new SQLite(file, { fileMustExist: true });
      try {
        live.pragma('busy_timeout = 5000');
        await live.backup(path.join(staging, SQLITE_ENTRY));
      } finally {
        live.close();
      }
      schema = sqliteSchema(path.join(staging, SQLITE_ENTRY));
      database = 'sqlite';
    } else {
      schema = await exportPostgres(source.databaseUrl, path.join(staging, POSTGRES_ENTRY));
      database = 'postgres';
    }
    // The directories go in through links: tar follows them, so the archive holds their contents under these names.
    // Not gzipped: compressing costs more time than the backup itself (bench: 60 MB, 7 s vs 1 s on a loaded host), and most of the
    // payload (uploads) is compressed already.
    const entries: string[] = [database === 'sqlite' ? SQLITE_ENTRY : POSTGRES_ENTRY];
    for (const dir of BACKED_UP_DIRS) {
      const from = path.join(source.dataDir, dir);
      if (!fs.existsSync(from)) continue;
      await fsp.symlink(from, path.join(staging, dir), 'dir');
      entries.push(dir);
    }
    const { header, key } = newHeader(source.installationKey, { version: source.version, schema, database });
    await pipeline(tar.c({ cwd: staging, portable: true, follow: true }, entries) as unknown as NodeJS.ReadableStream, encryptingStream(header, key), out);
    return header;
  } finally {
    await fsp.rm(staging, { recursive: true, force: true });
  }
}
