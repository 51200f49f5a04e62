// `slipway server restore`: a self-backup brought back onto an empty data directory (or database), whole or not at all.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import type { Db } from '../db/database.js';
import { servedDeployments } from '../db/live-deployments.js';
import { BackupReadError, decryptingStream, type SelfBackupHeader } from './backup-format.js';
import { dropAllTables, importPostgres, postgresHoldsInstallation } from './postgres-export.js';
import { REBUILD_MARKER, type RebuildEntry } from './restore-rebuilds.js';
import { BACKED_UP_DIRS, POSTGRES_ENTRY, SQLITE_ENTRY } from './self-backup.js';

export interface RestoreTarget {
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly installationKey: Buffer;
  /** Replace an installation found there. */
  readonly force: boolean;
  /** This Slipway: a backup of a newer schema is refused. */
  readonly version: string;
  readonly schema: string;
  /** Opens (and migrates) the restored database. */
  openDatabase(target: { file: string; url: string | undefined }): Promise<Db>;
}

/** A restore refused before anything was written (an installation in the way, a newer backup, another database kind). */
export class RestoreRefused extends Error {
  override readonly name = 'RestoreRefused';
}

/** The installation already at the target, if any: its description for the refusal. */
async function installationThere(target: RestoreTarget): Promise<string | undefined> {
  if (target.databaseUrl !== undefined) {
    const id = await postgresHoldsInstallation(target.databaseUrl);
    return id === undefined ? undefined : `the PostgreSQL database of SLIPWAY_DATABASE_URL holds installation ${id}`;
  }
  const file = path.join(target.dataDir, SQLITE_ENTRY);
  return fs.existsSync(file) ? `${target.dataDir} holds an installation (${SQLITE_ENTRY})` : undefined;
}

/**
 * Decrypts and unpacks `input` into a staging directory first: nothing reaches the data directory
 * or the database until the whole file has authenticated (a wrong key, a truncated or altered file
 * or a newer version fails with nothing written). Then the database (SQLite file, or the export
 * loaded into PostgreSQL in one transaction), the uploads and the build logs go into place, and the
 * deployments that were live are written to the rebuild marker for the next start.
 */
export async function restoreSelfBackup(target: RestoreTarget, input: Readable): Promise<{ header: SelfBackupHeader; rebuilds: number }> {
  const there = await installationThere(target);
  if (there !== undefined && !target.force) throw new RestoreRefused(`${there}; restoring would replace it (add --force to replace it)`);
  await fsp.mkdir(target.dataDir, { recursive: true, mode: 0o700 });
  const staging = path.join(target.dataDir, `.restore-${crypto.randomBytes(6).toString('hex')}`);
  await fsp.mkdir(staging, { mode: 0o700 });
  try {
    let header: SelfBackupHeader | undefined;
    await pipeline(
      input,
      decryptingStream(target.installationKey, (h) => {
        if (h.schema > target.schema) {
          throw new RestoreRefused(`this backup comes from Slipway ${h.version} (schema ${h.schema}), newer than this Slipway ${target.version} (schema ${target.schema}): restore it with that version or a newer one`);
        }
        const wanted = target.databaseUrl === undefined ? 'sqlite' : 'postgres';
        if (h.database !== wanted) {
          throw new RestoreRefused(
            h.database === 'sqlite'
              ? 'this backup is of an installation on SQLite: restore it without SLIPWAY_DATABASE_URL'
              : 'this backup is of an installation on PostgreSQL: set SLIPWAY_DATABASE_URL to the (empty) database to restore it into',
          );
        }
        header = h;
      }),
      tar.x({ cwd: staging, strict: true }),
    );
    if (header === undefined) throw new BackupReadError('truncated', 'the backup is truncated');
    const entry = header.database === 'sqlite' ? SQLITE_ENTRY : POSTGRES_ENTRY;
    if (!fs.existsSync(path.join(staging, entry))) throw new BackupReadError('corrupt', `the backup holds no ${entry}`);

    // Authenticated whole: from here on, the installation is replaced.
    for (const dir of BACKED_UP_DIRS) await fsp.rm(path.join(target.dataDir, dir), { recursive: true, force: true });
    let db: Db;
    if (header.database === 'sqlite') {
      for (const suffix of ['', '-wal', '-shm']) await fsp.rm(path.join(target.dataDir, SQLITE_ENTRY + suffix), { force: true });
      await fsp.rename(path.join(staging, SQLITE_ENTRY), path.join(target.dataDir, SQLITE_ENTRY));
      db = await target.openDatabase({ file: path.join(target.dataDir, SQLITE_ENTRY), url: undefined });
    } else {
      const url = target.databaseUrl ?? '';
      if (there !== undefined) await dropAllTables(url);
      // The current migrations make the schema; the export's rows go into it.
      await (await target.openDatabase({ file: path.join(target.dataDir, SQLITE_ENTRY), url })).destroy();
      await importPostgres(url, path.join(staging, POSTGRES_ENTRY));
      db = await target.openDatabase({ file: path.join(target.dataDir, SQLITE_ENTRY), url });
    }
    for (const dir of BACKED_UP_DIRS) {
      if (fs.existsSync(path.join(staging, dir))) await fsp.rename(path.join(staging, dir), path.join(target.dataDir, dir));
    }
    let rebuilds: RebuildEntry[];
    try {
      rebuilds = await servedDeployments(db);
    } finally {
      await db.destroy();
    }
    await fsp.writeFile(path.join(target.dataDir, REBUILD_MARKER), `${JSON.stringify({ restored_at: new Date().toISOString(), from: header.created_at, deployments: rebuilds }, null, 2)}\n`, { mode: 0o600 });
    return { header, rebuilds: rebuilds.length };
  } finally {
    await fsp.rm(staging, { recursive: true, force: true });
  }
}
