// `slipway server backup` and `slipway server restore`: Slipway's own state to and from an encrypted file.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { lockDataDir } from '../data-dir-lock.js';
import { latestMigrationName, openDatabase } from '../db/database.js';
import { BackupReadError } from '../operate/backup-format.js';
import { takeSelfBackup } from '../operate/self-backup.js';
import { RestoreRefused, restoreSelfBackup } from '../operate/self-restore.js';
import { KEY_FILE, readKeyFile } from '../secrets/installation-key.js';
import { VERSION } from '../version.js';
import { CliError, EXIT_USAGE } from './cli-error.js';
import type { CliIo } from './cli-io.js';

function serverConfig(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`, { exitCode: EXIT_USAGE });
    throw err;
  }
}

/** The installation key, never created here: SLIPWAY_SECRET_KEY, else the data directory's secret.key. */
function installationKey(config: Config, what: string): Buffer {
  if (config.secretKey !== undefined) return config.secretKey;
  const file = path.join(config.dataDir, KEY_FILE);
  if (!fs.existsSync(file)) {
    throw new CliError(`${what} needs the installation key: ${file} does not exist. Copy the secret.key of the installation there (mode 0600), or set SLIPWAY_SECRET_KEY`);
  }
  return readKeyFile(file);
}

function noDestinations(): never {
  throw new CliError('backup destinations (--destination, decisions §20) are not available in this version yet; use --file PATH', { exitCode: EXIT_USAGE });
}

/** `slipway server backup --file PATH`: works while the server runs; the file is written whole or not at all (0600). */
export async function runSelfBackup(io: CliIo, options: { file?: string; destination?: string }): Promise<void> {
  if (options.destination !== undefined) noDestinations();
  if (options.file === undefined) throw new CliError('say where the backup goes: --file PATH', { exitCode: EXIT_USAGE });
  const config = serverConfig();
  const file = path.resolve(io.cwd, options.file);
  if (fs.existsSync(file)) throw new CliError(`${file} exists; choose another name (a backup never overwrites one)`);
  const key = installationKey(config, 'a backup');
  const partial = `${file}.partial`;
  const started = Date.now();
  try {
    const out = fs.createWriteStream(partial, { mode: 0o600, flags: 'wx' });
    const header = await takeSelfBackup({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, installationKey: key, version: VERSION }, out);
    fs.renameSync(partial, file);
    const size = fs.statSync(file).size;
    io.stderr.write(`Backed up Slipway ${header.version} (${header.database}, schema ${header.schema}) to ${file}: ${size} bytes in ${((Date.now() - started) / 1000).toFixed(1)} s. It is encrypted under the installation key, which it does not hold: keep a copy of the key apart.\n`);
  } catch (err) {
    fs.rmSync(partial, { force: true });
    if (err instanceof CliError) throw err;
    throw new CliError(`backup failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** `slipway server restore --file PATH [--force]`: with the server stopped, onto an empty data directory (or database). */
export async function runSelfRestore(io: CliIo, options: { file?: string; destination?: string; backup?: string; force?: boolean }): Promise<void> {
  if (options.destination !== undefined) noDestinations();
  if (options.file === undefined) throw new CliError('say which backup to restore: --file PATH', { exitCode: EXIT_USAGE });
  const config = serverConfig();
  const file = path.resolve(io.cwd, options.file);
  if (!fs.existsSync(file)) throw new CliError(`${file} does not exist`);
  const key = installationKey(config, 'a restore');
  let lock;
  try {
    lock = await lockDataDir(config.dataDir, 'slipway server restore', 0);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`cannot restore while a server runs: ${err.message}`);
    throw err;
  }
  try {
    const { header, rebuilds } = await restoreSelfBackup(
      { dataDir: config.dataDir, databaseUrl: config.databaseUrl, installationKey: key, force: options.force === true, version: VERSION, schema: latestMigrationName(), openDatabase },
      fs.createReadStream(file),
    );
    io.stderr.write(
      `Restored the backup of ${header.created_at} (Slipway ${header.version}) into ${config.databaseUrl === undefined ? config.dataDir : 'the PostgreSQL database'}. ` +
        `Start the server: ${rebuilds} deployment${rebuilds === 1 ? '' : 's'} that were live will be rebuilt and released.\n`,
    );
  } catch (err) {
    if (err instanceof BackupReadError || err instanceof RestoreRefused) throw new CliError(`cannot restore ${file}: ${err.message}. Nothing was written.`);
    throw err;
  } finally {
    lock.release();
  }
}
