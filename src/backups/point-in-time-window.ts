// Point-in-time recovery's pure rules: the objects' names, the recoverable window, the base backup and the log files a recovery to a moment needs.
import { DomainError } from '../core/errors.js';
import type { BaseBackupRow, WalFileRow } from './pitr-store.js';

/** The objects of a database's point-in-time recovery, beside its backups (see backups.ts `backupKey`). */
export const pitrPrefix = (db: { name: string; id: string }): string => `${db.name}-${db.id.slice(0, 8)}/pitr`;

const compact = (at: Date): string => at.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');

/** A base backup's object: by start time, so a listing reads in order. */
export const baseBackupKey = (db: { name: string; id: string }, id: string, startedAt: Date): string => `${pitrPrefix(db)}/base/${compact(startedAt)}-${id}.tar.slwb`;

/** A segment (24 hex digits, maybe `.gz`) or a timeline history file (8 hex digits `.history`). */
const WAL_FILE = /^(?:[0-9A-F]{24}(?:\.gz)?|[0-9A-F]{8}\.history)$/;

/** A log file's object, named as the receiver named it; anything else is refused (the name comes from a container). */
export function walFileKey(db: { name: string; id: string }, fileName: string): string {
  if (!WAL_FILE.test(fileName)) throw new Error(`not a write-ahead log file name: ${JSON.stringify(fileName.slice(0, 80))}`);
  return `${pitrPrefix(db)}/wal/${fileName}.slwb`;
}

/** The receiver's file name of a log file object's key, or undefined for any other key. */
export function walFileOfKey(key: string): string | undefined {
  const match = /\/pitr\/wal\/([^/]+)\.slwb$/.exec(key);
  return match?.[1] !== undefined && WAL_FILE.test(match[1]) ? match[1] : undefined;
}

/** A segment's position in the log (its last 16 hex digits, the timeline left out); undefined for a history file. */
export const segmentPosition = (fileName: string): string | undefined => (/^[0-9A-F]{24}/.test(fileName) ? fileName.slice(8, 24) : undefined);

export interface RecoverableWindow {
  /** The end of the oldest kept base backup. */
  readonly from: Date;
  /** Every write committed before is in the destination. */
  readonly until: Date;
}

/** The window a restore `at` must lie in; undefined while there is none yet (no base backup finished, or no log archived since). */
export function recoverableWindow(bases: readonly BaseBackupRow[], archivedUntil: string | null | undefined): RecoverableWindow | undefined {
  const ends = bases.filter((b) => b.status === 'succeeded' && b.finished_at !== null).map((b) => Date.parse(b.finished_at!));
  if (ends.length === 0 || archivedUntil === null || archivedUntil === undefined) return undefined;
  const from = new Date(Math.min(...ends));
  const until = new Date(archivedUntil);
  return until.getTime() < from.getTime() ? undefined : { from, until };
}

/** `at` read and checked against the window: a clear 400 naming the window otherwise. */
export function checkRecoveryTime(at: unknown, window: RecoverableWindow | undefined): Date {
  if (typeof at !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/.test(at) || Number.isNaN(Date.parse(at))) {
    throw new DomainError('validation_error', 'at must be an ISO 8601 time with its zone, e.g. "2026-11-28T14:05:00Z"');
  }
  const time = new Date(at);
  if (window === undefined) {
    throw new DomainError('validation_error', 'there is no recoverable window yet: the first base backup has not finished or no write-ahead log was archived since');
  }
  if (time.getTime() < window.from.getTime() || time.getTime() > window.until.getTime()) {
    throw new DomainError('validation_error', `at ${time.toISOString()} is outside the recoverable window, ${window.from.toISOString()} to ${window.until.toISOString()}`);
  }
  return time;
}

/** The newest base backup that ended at or before `at` (the window guarantees one). */
export function chooseBaseBackup(bases: readonly BaseBackupRow[], at: Date): BaseBackupRow | undefined {
  return bases
    .filter((b) => b.status === 'succeeded' && b.finished_at !== null && Date.parse(b.finished_at) <= at.getTime())
    .sort((a, b) => Date.parse(b.finished_at!) - Date.parse(a.finished_at!))[0];
}

/**
 * The log files a recovery from `base` to `at` reads: every history file, and the segments from
 * the base's first one through the first closed after `at` (it may hold commits before `at`;
 * later ones cannot).
 */
export function walFilesFor(files: readonly WalFileRow[], base: Pick<BaseBackupRow, 'start_wal'>, at: Date): WalFileRow[] {
  const start = segmentPosition(base.start_wal) ?? '';
  const history = files.filter((f) => segmentPosition(f.name) === undefined);
  const segments = files
    .filter((f) => (segmentPosition(f.name) ?? '') >= start)
    .sort((a, b) => (segmentPosition(a.name)! < segmentPosition(b.name)! ? -1 : 1));
  const needed: WalFileRow[] = [];
  for (const segment of segments) {
    needed.push(segment);
    if (Date.parse(segment.closed_at) > at.getTime()) break;
  }
  return [...history, ...needed];
}
