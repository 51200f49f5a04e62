// The data directory's lock: one server process per data directory, a second refused with the holder's name.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import { ConfigError } from './config.js';

/** A held lock; `release` lets the next process in. */
export interface DataDirLock {
  /** With `removeFiles`, the lock's files go too: for a command that leaves the directory as it found it (a failed restore). */
  release(options?: { removeFiles?: boolean }): void;
}

/** The lock's file in the data directory (SQLite's journal and the holder's name sit beside it while it is held). */
export const LOCK_FILE = 'server.lock';

interface Holder {
  readonly pid: number;
  readonly host: string;
  readonly instance: string;
  readonly started_at: string;
}

/**
 * Takes `<dataDir>/server.lock`: an exclusive SQLite lock (a kernel file lock, dropped when the
 * process ends however it ends), held until `release`. Who holds it is written beside it in
 * `server.lock.holder`, read only to name the holder when the lock is refused: the lock decides,
 * never that file. Throws a ConfigError naming the holder when another process still holds it after `waitMs`.
 */
export async function lockDataDir(dataDir: string, instance: string, waitMs = 5000): Promise<DataDirLock> {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, LOCK_FILE);
  const holderFile = `${file}.holder`;
  // A holder that was just killed may take a moment to be gone (an orphaned worker ending): tried for `waitMs`.
  const deadline = Date.now() + waitMs;
  let lock: SQLite.Database;
  for (;;) {
    lock = new SQLite(file, { timeout: 0 });
    try {
      lock.pragma('locking_mode = EXCLUSIVE');
      // The first write under EXCLUSIVE locking mode keeps the exclusive lock until the connection closes.
      lock.exec('CREATE TABLE IF NOT EXISTS held (at TEXT); INSERT INTO held (at) VALUES (datetime())');
      break;
    } catch (err) {
      lock.close();
      const code = (err as { code?: string }).code ?? '';
      if (!code.startsWith('SQLITE_BUSY') && !code.startsWith('SQLITE_LOCKED')) throw err;
      if (Date.now() >= deadline) {
        throw new ConfigError(`another Slipway server holds the data directory ${dataDir}: ${describeHolder(holderFile)}; stop it first (one server per data directory; several instances share PostgreSQL, each with its own data directory)`);
      }
      await sleep(200);
    }
  }
  const holder: Holder = { pid: process.pid, host: os.hostname(), instance, started_at: new Date().toISOString() };
  fs.writeFileSync(holderFile, `${JSON.stringify(holder)}\n`, { mode: 0o600 });
  let released = false;
  return {
    release(options): void {
      if (released) return;
      released = true;
      // Unlinked while still held: a process waiting meanwhile opens the path again at each try, so it locks the new file.
      if (options?.removeFiles === true) for (const name of [file, `${file}-journal`]) fs.rmSync(name, { force: true });
      fs.rmSync(holderFile, { force: true });
      lock.close();
    },
  };
}

function describeHolder(holderFile: string): string {
  try {
    const holder = JSON.parse(fs.readFileSync(holderFile, 'utf8')) as Partial<Holder>;
    return `process ${String(holder.pid)} on ${String(holder.host)} (instance ${String(holder.instance)}, started ${String(holder.started_at)})`;
  } catch {
    return 'a process that has not written its name yet';
  }
}
