// `slipway server backup` and `slipway server restore`: Slipway's own state to and from an encrypted file or a backup destination.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { LOCK_FILE, lockDataDir } from '../data-dir-lock.js';
import type { Readable, Writable } from 'node:stream';
import { localDestinationDir, localObjectStore } from '../backups/local-object-store.js';
import { DestinationError, type ObjectStore } from '../backups/object-store.js';
import { connectDatabase, latestMigrationName, openDatabase } from '../db/database.js';
import { BackupReadError, type SelfBackupHeader } from '../operate/backup-format.js';
import { postgresHoldsInstallation } from '../operate/postgres-export.js';
import { fileSink } from '../operate/file-sink.js';
import { SQLITE_ENTRY, takeSelfBackup } from '../operate/self-backup.js';
import {
  listSelfBackups,
  openDescribedDestination,
  openSelfBackupDestination,
  putSelfBackup,
  readSelfBackup,
  selfBackupName,
  SelfBackupDestinationError,
  type DestinationOpening,
} from '../operate/self-backup-destination.js';
import { RestoreRefused, restoreSelfBackup } from '../operate/self-restore.js';
import { KEY_FILE, readKeyFile } from '../secrets/installation-key.js';
import { ValueCipher } from '../secrets/value-cipher.js';
import { VERSION } from '../version.js';
import { CliError, EXIT_USAGE } from './cli-error.js';
import type { CliIo } from './cli-io.js';
import { commandWord } from './output.js';

/** Time a backup to, or a restore from, a destination may take. */
const BACKUP_TIMEOUT_MS = 6 * 3_600_000;
const RESTORE_TIMEOUT_MS = 6 * 3_600_000;

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

/** Runs `use` with the installation's database as it is (not migrated: a server may be running on it) and its cipher. */
async function withInstallation<T>(config: Config, key: Buffer, use: (at: DestinationOpening) => Promise<T>): Promise<T> {
  const db = await connectDatabase({ file: path.join(config.dataDir, SQLITE_ENTRY), url: config.databaseUrl });
  try {
    return await use({ db, cipher: new ValueCipher(key), dataDir: config.dataDir, allowPrivateTargets: config.allowPrivateTargets });
  } finally {
    await db.destroy();
  }
}

/** A destination's or a lookup's failure as the command's message. */
function destinationFailure(err: unknown, what: string): CliError {
  if (err instanceof SelfBackupDestinationError) return new CliError(`${what}: ${err.message}`);
  if (err instanceof DestinationError) return new CliError(`${what}: the destination ${err.step === 'resolve' ? 'cannot be reached' : err.step === 'auth' ? 'refused the credentials' : `failed (${err.step})`}: ${err.message}`);
  return new CliError(`${what}: ${err instanceof Error ? err.message : String(err)}`);
}

/** `slipway server backup --destination ID|NAME`: one object in a §20 destination, named by the time it was taken. */
async function backupToDestination(io: CliIo, config: Config, key: Buffer, reference: string): Promise<void> {
  const started = Date.now();
  const name = selfBackupName(new Date(started));
  let header: SelfBackupHeader | undefined;
  try {
    const where = await withInstallation(config, key, async (at) => {
      const { row, objects } = await openSelfBackupDestination(at, reference);
      const take = async (out: Writable): Promise<void> => {
        header = await takeSelfBackup({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, installationKey: key, version: VERSION }, out);
      };
      await putSelfBackup(objects, name, take, AbortSignal.timeout(BACKUP_TIMEOUT_MS));
      return `backup destination "${row.name}" (${objects.describe})`;
    });
    io.stdout.write(`${name}\n`);
    io.stderr.write(
      `Backed up Slipway ${header?.version ?? VERSION} (${header?.database ?? ''}, schema ${header?.schema ?? ''}) to ${where} as ${name} in ${((Date.now() - started) / 1000).toFixed(1)} s. ` +
        `Restore it with: slipway server restore --destination ${commandWord(reference)} --backup ${name}. It is encrypted under the installation key, which it does not hold: keep a copy of the key apart.\n`,
    );
  } catch (err) {
    throw destinationFailure(err, 'backup failed');
  }
}

/** `slipway server backup --file PATH | --destination ID|NAME`: works while the server runs; the file is written whole or not at all (0600). */
export async function runSelfBackup(io: CliIo, options: { file?: string; destination?: string }): Promise<void> {
  if ((options.file === undefined) === (options.destination === undefined)) throw new CliError('say where the backup goes: --file PATH or --destination ID|NAME (one of them)', { exitCode: EXIT_USAGE });
  const config = serverConfig();
  if (options.destination !== undefined) {
    if (!fs.existsSync(path.join(config.dataDir, SQLITE_ENTRY)) && config.databaseUrl === undefined) throw new CliError(`no installation in ${config.dataDir} (no ${SQLITE_ENTRY}): nothing to back up`);
    return backupToDestination(io, config, installationKey(config, 'a backup'), options.destination);
  }
  const file = path.resolve(io.cwd, options.file ?? '');
  if (fs.existsSync(file)) throw new CliError(`${file} exists; choose another name (a backup never overwrites one)`);
  const key = installationKey(config, 'a backup');
  const partial = `${file}.partial`;
  const started = Date.now();
  try {
    const out = fileSink(fs.openSync(partial, 'wx', 0o600));
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

/** Whether the target already holds an installation a destination can be looked up in. */
async function installationAt(config: Config): Promise<boolean> {
  if (config.databaseUrl !== undefined) return (await postgresHoldsInstallation(config.databaseUrl)) !== undefined;
  return fs.existsSync(path.join(config.dataDir, SQLITE_ENTRY));
}

interface RestoreOptions {
  file?: string;
  destination?: string;
  destinationSettings?: string;
  backup?: string;
  force?: boolean;
}

/**
 * The backup object to restore from a destination: named in the installation found at the target
 * (restoring over it with --force), or described by --destination-settings (an empty new host,
 * whose database is not there to name it).
 */
async function destinationInput(io: CliIo, config: Config, key: Buffer, options: RestoreOptions): Promise<{ input: Readable; what: string }> {
  let objects: ObjectStore;
  if (options.destinationSettings !== undefined) {
    const file = path.resolve(io.cwd, options.destinationSettings);
    let body: unknown;
    try {
      body = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (err) {
      throw new CliError(`cannot read the destination settings ${file}: ${err instanceof Error ? err.message : String(err)}`, { exitCode: EXIT_USAGE });
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new CliError(`${file} must hold a JSON object (the fields of POST /api/v1/backup-destinations)`, { exitCode: EXIT_USAGE });
    objects = await openDescribedDestination(body as Record<string, unknown>, config.allowPrivateTargets);
  } else {
    const reference = options.destination ?? '';
    const copiedLocal = localDestinationDir(config.dataDir, reference.toLowerCase());
    const there = await installationAt(config);
    if (!there && /^[0-9a-f-]{36}$/i.test(reference) && fs.existsSync(copiedLocal)) {
      // A local destination's directory copied onto the new host: its objects are there, no database needed.
      objects = localObjectStore(copiedLocal);
    } else if (!there) {
      throw new CliError(
        `${config.databaseUrl === undefined ? config.dataDir : 'the PostgreSQL database'} holds no installation to look backup destination "${reference}" up in: ` +
          'on a new host, describe the destination with --destination-settings FILE (a JSON object: type, endpoint, region, bucket, prefix, access_key_id, secret_access_key, force_path_style). Nothing was written.',
        { exitCode: EXIT_USAGE },
      );
    } else {
      objects = await withInstallation(config, key, async (at) => (await openSelfBackupDestination(at, reference)).objects);
    }
  }
  if (options.backup === undefined) {
    const newest = (await listSelfBackups(objects, AbortSignal.timeout(60_000))).slice(-5).reverse();
    throw new CliError(`say which backup to restore: --backup NAME (${objects.describe} holds ${newest.length === 0 ? 'none' : `${newest.join(', ')}${newest.length === 5 ? ', …' : ''}`})`, { exitCode: EXIT_USAGE });
  }
  return { input: await readSelfBackup(objects, options.backup, AbortSignal.timeout(RESTORE_TIMEOUT_MS)), what: `${options.backup} from ${objects.describe}` };
}

/** `slipway server restore --file PATH | --destination ID|NAME --backup NAME [--force]`: with the server stopped, onto an empty data directory (or database). */
export async function runSelfRestore(io: CliIo, options: RestoreOptions): Promise<void> {
  const fromDestination = options.destination !== undefined || options.destinationSettings !== undefined;
  if ((options.file === undefined) === !fromDestination) {
    throw new CliError('say which backup to restore: --file PATH, or --destination ID|NAME (or --destination-settings FILE) with --backup NAME', { exitCode: EXIT_USAGE });
  }
  const config = serverConfig();
  const file = options.file === undefined ? undefined : path.resolve(io.cwd, options.file);
  if (file !== undefined && !fs.existsSync(file)) throw new CliError(`${file} does not exist`);
  const key = installationKey(config, 'a restore');
  // A failed restore leaves the data directory as it found it (contract §25: "nothing written"): the
  // directories the lock creates and the lock's files are removed again.
  const created = missingDirs(config.dataDir);
  const hadLock = fs.existsSync(path.join(config.dataDir, LOCK_FILE));
  let lock;
  try {
    lock = await lockDataDir(config.dataDir, 'slipway server restore', 0);
  } catch (err) {
    removeCreatedDirs(created);
    if (err instanceof ConfigError) throw new CliError(`cannot restore while a server runs: ${err.message}`);
    throw err;
  }
  let what = file ?? options.backup ?? '';
  let restored = false;
  try {
    let input: Readable;
    if (file !== undefined) {
      input = fs.createReadStream(file);
    } else {
      ({ input, what } = await destinationInput(io, config, key, options));
    }
    const { header, rebuilds } = await restoreSelfBackup(
      { dataDir: config.dataDir, databaseUrl: config.databaseUrl, installationKey: key, force: options.force === true, version: VERSION, schema: latestMigrationName(), openDatabase },
      input,
    );
    io.stderr.write(
      `Restored the backup of ${header.created_at} (Slipway ${header.version}) into ${config.databaseUrl === undefined ? config.dataDir : 'the PostgreSQL database'}. ` +
        `Start the server: ${rebuilds} deployment${rebuilds === 1 ? '' : 's'} that were live will be rebuilt and released.\n`,
    );
    restored = true;
  } catch (err) {
    if (err instanceof BackupReadError || err instanceof RestoreRefused) throw new CliError(`cannot restore ${what}: ${err.message}. Nothing was written.`);
    if (err instanceof SelfBackupDestinationError || err instanceof DestinationError) {
      const failure = destinationFailure(err, `cannot restore ${what}`);
      throw new CliError(`${failure.message}. Nothing was written.`);
    }
    throw err;
  } finally {
    lock.release({ removeFiles: !restored && !hadLock });
    if (!restored) removeCreatedDirs(created);
  }
}

/** `dir` and those of its parents that do not exist, deepest first: what creating it makes. */
function missingDirs(dir: string): string[] {
  const missing: string[] = [];
  for (let at = path.resolve(dir); !fs.existsSync(at) && path.dirname(at) !== at; at = path.dirname(at)) missing.push(at);
  return missing;
}

/** Removes directories a failed command created, deepest first, each only when empty: anything put there since stays. */
function removeCreatedDirs(dirs: readonly string[]): void {
  for (const dir of dirs) {
    try {
      fs.rmdirSync(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return;
    }
  }
}
