// The database part: the private data directory, the database, this installation's id and key, and coordination over them.
import path from 'node:path';
import type { Config } from '../config.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import type { Coordination } from '../deploy/coordination.js';
import { memoryCoordination } from '../deploy/memory-coordination.js';
import { securePrivateDataDir } from '../secrets/private-data-dir.js';
import { unlockInstallation } from '../secrets/unlock.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { readKeyCheck, writeKeyCheck } from './app-config-store.js';
import { instanceId as loadInstanceId, openDatabase, type Db } from './database.js';
import { pgCoordination } from './pg-coordination.js';

export interface DatabaseOffers {
  readonly db: Db;
  /** This installation's id (the `dev.slipway.instance` label on its containers). */
  readonly instanceId: string;
  /** The installation key's cipher (a wrong SLIPWAY_SECRET_KEY stops the start here). */
  readonly cipher: ValueCipher;
}

/** Opens the database (SQLite in the data directory, or SLIPWAY_DATABASE_URL) and unlocks the installation key. */
export async function databasePart(config: Config): Promise<Part<DatabaseOffers>> {
  await securePrivateDataDir(config.dataDir);
  const db = await openDatabase({ file: path.join(config.dataDir, 'slipway.db'), url: config.databaseUrl });
  try {
    const instanceId = await loadInstanceId(db);
    const unlocked = await unlockInstallation(config.secretKey, config.dataDir, { read: () => readKeyCheck(db), write: (check) => writeKeyCheck(db, check) });
    return { offers: { db, instanceId, cipher: unlocked.cipher }, stop: () => db.destroy() };
  } catch (err) {
    await db.destroy();
    throw err;
  }
}

/** Several instances share PostgreSQL: locks, leadership and route changes go through it (decisions §15). */
export async function coordinationPart(config: Config, log: Log): Promise<Part<Coordination>> {
  const coordination = config.databaseUrl === undefined ? memoryCoordination() : await pgCoordination({ url: config.databaseUrl, log });
  return { offers: coordination, stop: () => coordination.close() };
}
