// `slipway server rotate-key`, `reset-password` and `cleanup` (`slipway server` itself is server-run.ts).
import { loadServerConfigOrExit } from './load-server-config.js';
import { ConfigError, loadConfig } from '../config.js';
import { randomBase62 } from '../core/credentials.js';
import { DomainError } from '../core/errors.js';
import { resetPassword } from '../domain/accounts.js';
import { databaseAccountStore } from '../db/account-store.js';
import { CliError, EXIT_USAGE } from './cli-error.js';
import type { CliIo } from './cli-io.js';
import { instanceId, openDatabase } from '../db/database.js';
import { readKeyCheck, reencryptAll, writeKeyCheck } from '../db/app-config-store.js';
import { rotateInstallationKey } from '../secrets/rotate-key.js';
import { unlockInstallation } from '../secrets/unlock.js';
import fs from 'node:fs';
import path from 'node:path';
import { removeIdleNetworks } from '../deploy/host-cleanup.js';
import { removeIdleHostFirewall } from '../runtime/docker/build-sandbox.js';
import { createDockerEngine } from '../runtime/docker/docker-engine.js';

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
    const user = await resetPassword(databaseAccountStore(db), email, password);
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

/**
 * `slipway server cleanup [--remove-containers]`, on the server host with the server stopped:
 * removes the installation's networks that nothing uses (with their firewall chains); with
 * `--host-firewall`, Slipway's host-wide chains too when no installation on the host uses them.
 * The app network stays while app containers exist, unless `--remove-containers` removes them first.
 */
export async function runCleanup(io: CliIo, options: { removeContainers?: boolean; hostFirewall?: boolean }): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`, { exitCode: EXIT_USAGE });
    throw err;
  }
  const file = path.join(config.dataDir, 'slipway.db');
  if (config.databaseUrl === undefined && !fs.existsSync(file)) {
    io.stdout.write(`Nothing to clean up: no installation in ${config.dataDir}.\n`);
    return;
  }
  const db = await openDatabase({ file, url: config.databaseUrl });
  let id: string;
  try {
    id = await instanceId(db);
  } finally {
    await db.destroy();
  }
  const engine = createDockerEngine(config.dockerHost);
  const result = await removeIdleNetworks(engine, id, { removeContainers: options.removeContainers === true });
  if (result.removedContainers > 0) io.stdout.write(`Removed ${result.removedContainers} container(s) (images, volumes and records are kept: the next start runs the apps again).\n`);
  for (const name of result.removed) io.stdout.write(`Removed network ${name} and its firewall rules.\n`);
  // Host-wide chains serve every installation on the host: removed only when asked (another one may be starting a build).
  const chains = options.hostFirewall !== true ? [] : await removeIdleHostFirewall().catch((err: unknown) => {
    io.stderr.write(`Could not clean the firewall (${err instanceof Error ? err.message : String(err)}): run as root with iptables.\n`);
    return [];
  });
  if (chains.length > 0) io.stdout.write(`Removed firewall chains no installation uses: ${chains.join(', ')}.\n`);
  for (const { name, reason } of result.kept) io.stderr.write(`Kept network ${name}: ${reason}.\n`);
  if (result.kept.length > 0) {
    throw new CliError('some networks are still in use (stop the server, or pass --remove-containers to stop the apps too)', { code: 'in_use' });
  }
  if (result.removed.length === 0 && chains.length === 0) io.stdout.write('Nothing to clean up.\n');
}
