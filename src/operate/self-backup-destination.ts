// Self-backups in a §20 backup destination: the destination found by id or name, each backup one object under a fixed folder, listed, pruned and read back.
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { checkS3, openDestination } from '../backups/destinations.js';
import type { DestinationRow } from '../backups/backup-store.js';
import type { ObjectStore } from '../backups/object-store.js';
import { s3ObjectStore } from '../backups/s3-object-store.js';
import { DomainError } from '../core/errors.js';
import { databaseBackupStore } from '../db/backup-store.js';
import type { Db } from '../db/database.js';
import type { ValueCipher } from '../secrets/value-cipher.js';

/** Where self-backups go inside a destination (after its prefix): apart from the databases' backups. */
export const SELF_BACKUP_FOLDER = 'slipway-self-backups/';
const NAME_PREFIX = 'slipway-self-backup-';
const NAME_SUFFIX = '.slipway-backup';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A backup's name: sortable by the time it was taken, recognisable among other objects and files. */
export const selfBackupName = (at: Date): string => `${NAME_PREFIX}${at.toISOString().replace(/[:.]/g, '-')}${NAME_SUFFIX}`;
export const isSelfBackupName = (name: string): boolean => name.startsWith(NAME_PREFIX) && name.endsWith(NAME_SUFFIX) && !name.includes('/');

/** A destination that cannot be used for a self-backup: not found, ambiguous, or its settings refused. */
export class SelfBackupDestinationError extends Error {
  override readonly name = 'SelfBackupDestinationError';
}

export interface DestinationOpening {
  readonly db: Db;
  readonly cipher: ValueCipher;
  readonly dataDir: string;
  readonly allowPrivateTargets: boolean;
}

/**
 * The destination `reference` (its id, or its name when only one destination has that name) in the
 * installation's database, opened with its secret decrypted. The self-backup is the operator's, not
 * a user's: any user's or team's destination may be named. A name is matched as given (trimmed);
 * failing that, regardless of case (names were lower-cased before they kept their case).
 */
export async function openSelfBackupDestination(at: DestinationOpening, reference: string): Promise<{ row: DestinationRow; objects: ObjectStore }> {
  const store = databaseBackupStore(at.db, at.cipher);
  let row: DestinationRow | undefined;
  if (UUID.test(reference)) {
    row = await store.getDestination(reference.toLowerCase());
  } else {
    const wanted = reference.trim();
    const all = await at.db.selectFrom('backup_destinations').select(['id', 'name']).execute();
    const exact = all.filter((r) => r.name === wanted);
    const named = exact.length > 0 ? exact : all.filter((r) => r.name.toLowerCase() === wanted.toLowerCase());
    if (named.length > 1) throw new SelfBackupDestinationError(`${named.length} backup destinations are named "${reference}" (of different users or teams): give its id (${named.map((r) => r.id).join(', ')})`);
    if (named[0] !== undefined) row = await store.getDestination(named[0].id);
  }
  if (row === undefined) throw new SelfBackupDestinationError(`no backup destination "${reference}" in this installation (GET /api/v1/backup-destinations lists them)`);
  return { row, objects: await openDestination({ store, dataDir: at.dataDir, allowPrivateTargets: at.allowPrivateTargets }, row) };
}

/**
 * An S3 destination described by its settings (the fields of POST /api/v1/backup-destinations, the
 * secret included): how a restore onto an empty host reaches a bucket its database is not there to name.
 */
export async function openDescribedDestination(body: Record<string, unknown>, allowPrivateTargets: boolean): Promise<ObjectStore> {
  if (body['type'] !== undefined && body['type'] !== 's3') throw new SelfBackupDestinationError('the destination settings must be of an s3 destination (a local one is a directory: restore its file with --file)');
  const secret = body['secret_access_key'];
  if (typeof secret !== 'string' || secret === '') throw new SelfBackupDestinationError('the destination settings need secret_access_key');
  try {
    return s3ObjectStore(await checkS3({ allowPrivateTargets }, body, undefined), secret, allowPrivateTargets);
  } catch (err) {
    if (err instanceof DomainError) throw new SelfBackupDestinationError(`the destination settings: ${err.message}`);
    throw err;
  }
}

/**
 * Writes one backup (`take` writing the self-backup file to the stream it is given) as the object
 * `name`. The destination is reached and its credentials checked first; a failure on either side
 * leaves no object behind (S3's multipart upload is aborted, a local partial file removed).
 */
export async function putSelfBackup(objects: ObjectStore, name: string, take: (out: Writable) => Promise<unknown>, signal: AbortSignal): Promise<void> {
  await objects.reach(signal);
  await objects.authorize(signal);
  const body = new PassThrough();
  // Its error is the snapshot's, reported below; the upload may not be reading it yet.
  body.on('error', () => undefined);
  // A snapshot that fails before writing (or without ending its stream) must still end the upload.
  const taking = take(body).then(
    () => void body.end(),
    (err: unknown) => {
      body.destroy(err instanceof Error ? err : new Error(String(err)));
      throw err;
    },
  );
  const [taken, put] = await Promise.allSettled([taking, objects.put(SELF_BACKUP_FOLDER + name, body, signal)]);
  if (taken.status === 'rejected') {
    await objects.delete(SELF_BACKUP_FOLDER + name, AbortSignal.timeout(30_000)).catch(() => undefined);
    // The upload's failure explains a snapshot cut by it better than the snapshot's "premature close".
    const cut = ['ERR_STREAM_PREMATURE_CLOSE', 'ERR_STREAM_DESTROYED'].includes((taken.reason as { code?: string } | undefined)?.code ?? '');
    throw put.status === 'rejected' && cut ? put.reason : taken.reason;
  }
  if (put.status === 'rejected') throw put.reason;
}

/** The self-backups in a destination, oldest first. */
export async function listSelfBackups(objects: ObjectStore, signal: AbortSignal): Promise<string[]> {
  const keys = await objects.list(SELF_BACKUP_FOLDER, signal);
  return keys.map((key) => key.slice(SELF_BACKUP_FOLDER.length)).filter(isSelfBackupName).sort();
}

/** Removes all but the newest `keep` self-backups of a destination. */
export async function pruneSelfBackups(objects: ObjectStore, keep: number, signal: AbortSignal): Promise<void> {
  const all = await listSelfBackups(objects, signal);
  for (const old of all.slice(0, Math.max(0, all.length - keep))) await objects.delete(SELF_BACKUP_FOLDER + old, signal);
}

/** A self-backup's bytes; a name that is not among the destination's backups is refused, listing the newest ones. */
export async function readSelfBackup(objects: ObjectStore, name: string, signal: AbortSignal): Promise<Readable> {
  const wanted = name.startsWith(SELF_BACKUP_FOLDER) ? name.slice(SELF_BACKUP_FOLDER.length) : name;
  await objects.reach(signal);
  await objects.authorize(signal);
  const all = await listSelfBackups(objects, signal);
  if (!all.includes(wanted)) {
    const newest = all.slice(-5).reverse();
    throw new SelfBackupDestinationError(
      `${objects.describe} holds no self-backup "${wanted}"${newest.length === 0 ? ' (it holds none)' : `; the newest: ${newest.join(', ')}`}`,
    );
  }
  return objects.get(SELF_BACKUP_FOLDER + wanted, signal);
}
