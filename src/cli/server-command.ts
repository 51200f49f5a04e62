// `slipway server rotate-key` and `slipway server reset-password` (`slipway server` itself is server-run.ts).
import { loadServerConfigOrExit } from './load-server-config.js';
import { ConfigError, loadConfig } from '../config.js';
import { randomBase62 } from '../core/credentials.js';
import { DomainError } from '../core/errors.js';
import { resetPassword } from '../domain/accounts.js';
import { CliError, EXIT_USAGE } from './cli-error.js';
import type { CliIo } from './cli-io.js';
import { instanceId, openDatabase } from '../db/database.js';
import { readKeyCheck, reencryptAll, writeKeyCheck } from '../db/app-config-store.js';
import { rotateInstallationKey } from '../secrets/rotate-key.js';
import { unlockInstallation } from '../secrets/unlock.js';
import path from 'node:path';

/**
 * `slipway server rotate-key`: re-encrypts the app configuration under a new installation key.
 * Run it with the server stopped (a running server keeps using the key it started with).
 */
export async function rotateKey(): Promise<void> {
  const config = loadServerConfigOrExit();
  const db = await openDatabase({ file: path.join(config.dataDir, 'slipway.db'), url: config.databaseUrl });
  try {
    await instanceId(db);
    const unlocked = await unlockInstallation(config.secretKey, config.dataDir, { read: () => readKeyCheck(db), write: (check) => writeKeyCheck(db, check) });
    const { count, where } = await rotateInstallationKey({
      unlocked,
      dataDir: config.dataDir,
      newKey: config.newSecretKey,
      reencrypt: (from, to) => reencryptAll(db, from, to),
    });
    process.stdout.write(`Re-encrypted ${count} value${count === 1 ? '' : 's'} under the new key: ${where}.\n`);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`slipway: cannot rotate the key: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw err;
  } finally {
    await db.destroy();
  }
}

/**
 * `slipway server reset-password EMAIL`, run on the server host with the server's configuration
 * (SLIPWAY_DATA_DIR, or SLIPWAY_DATABASE_URL for PostgreSQL): sets a new random password, printed
 * once, or with --password-stdin the first line of stdin; revokes every session of the user.
 */
export async function runResetPassword(io: CliIo, email: string, options: { passwordStdin?: boolean }): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`, { exitCode: EXIT_USAGE });
    throw err;
  }
  let password = randomBase62(20);
  if (options.passwordStdin === true) {
    password = await firstLine(io);
  }
  const db = await openDatabase({ file: path.join(config.dataDir, 'slipway.db'), url: config.databaseUrl });
  try {
    const user = await resetPassword(db, email, password);
    const where = config.databaseUrl === undefined ? config.dataDir : 'the PostgreSQL database';
    io.stderr.write(`The password of ${user.email} (in ${where}) was reset; its sessions are logged out (API keys keep working).\n`);
    if (options.passwordStdin !== true) io.stdout.write(`New password (shown only once): ${password}\n`);
  } catch (err) {
    if (err instanceof DomainError) throw new CliError(err.message, { code: err.code });
    throw err;
  } finally {
    await db.destroy();
  }
}

/** The first line of stdin (at most 4 KiB are read), without its line ending. */
async function firstLine(io: CliIo): Promise<string> {
  let text = '';
  for await (const chunk of io.stdin) {
    text += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
    if (text.includes('\n') || text.length > 4096) break;
  }
  return (text.split(/\r?\n/)[0] ?? '').slice(0, 4096);
}
