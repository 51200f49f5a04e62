// Database connection: Kysely over better-sqlite3 (WAL) or PostgreSQL, with the dated migrations run on open.
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, type Dialect, type Migration, type MigrationProvider } from 'kysely';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, ensurePrivateFile } from '../secrets/private-data-dir.js';
import type { Database } from './schema.js';
import { nowIso } from '../core/now.js';
import * as initial from './migrations/2026-11-21-001-initial.js';
import * as instance from './migrations/2026-11-21-002-instance.js';
import * as appConfig from './migrations/2026-11-22-001-app-config.js';
import * as subdomainClaims from './migrations/2026-11-22-002-subdomain-claims.js';
import * as customDomains from './migrations/2026-11-22-003-custom-domains.js';
import * as webhooks from './migrations/2026-11-22-004-webhooks.js';
import * as deploymentListVersion from './migrations/2026-11-23-001-deployment-list-version.js';
import * as userQuotas from './migrations/2026-11-27-020-user-quotas.js';
import * as previews from './migrations/2026-11-27-040-previews.js';
import * as teams from './migrations/2026-11-27-030-teams.js';
import * as instances from './migrations/2026-11-27-060-instances.js';
import * as uploadArchives from './migrations/2026-11-27-061-upload-archives.js';
import * as replicas from './migrations/2026-11-27-070-replicas.js';
import * as userDisabled from './migrations/2026-11-27-090-user-disabled.js';
import * as buildLogChunks from './migrations/2026-11-27-110-build-log-chunks.js';
import * as buildQueue from './migrations/2026-11-27-111-build-queue.js';
import * as acmeChallenges from './migrations/2026-11-27-120-acme-challenges.js';
import * as configPending from './migrations/2026-11-28-040-config-pending.js';
import * as compose from './migrations/2026-11-28-130-compose.js';
import * as pointInTime from './migrations/2026-11-28-140-point-in-time.js';
import * as managedDatabases from './migrations/2026-11-28-050-managed-databases.js';
import * as schemaVersion from './migrations/2026-11-28-100-schema-version.js';
import { latestMigration, recordVersion, refuseNewerSchema } from './schema-version.js';
import { VERSION } from '../version.js';
import * as databaseWorker from './migrations/2026-11-28-055-database-worker.js';
import * as jobs from './migrations/2026-11-28-070-jobs.js';
import * as notifications from './migrations/2026-11-28-080-notifications.js';
import * as buildDockerfile from './migrations/2026-11-28-110-build-dockerfile.js';
import * as backups from './migrations/2026-11-28-120-backups.js';
import * as jobService from './migrations/2026-11-28-191-job-service.js';
import { withStatementCache } from './statement-cache.js';
import crypto from 'node:crypto';

export type Db = Kysely<Database>;

/** Migrations in date order; a migration, once released, never changes. */
const MIGRATIONS: Record<string, Migration> = {
  '2026-11-21-001-initial': initial,
  '2026-11-21-002-instance': instance,
  '2026-11-22-001-app-config': appConfig,
  '2026-11-22-002-subdomain-claims': subdomainClaims,
  '2026-11-22-003-custom-domains': customDomains,
  '2026-11-22-004-webhooks': webhooks,
  '2026-11-23-001-deployment-list-version': deploymentListVersion,
  '2026-11-27-020-user-quotas': userQuotas,
  '2026-11-27-040-previews': previews,
  '2026-11-27-030-teams': teams,
  '2026-11-27-060-instances': instances,
  '2026-11-27-061-upload-archives': uploadArchives,
  '2026-11-27-070-replicas': replicas,
  '2026-11-27-090-user-disabled': userDisabled,
  '2026-11-27-110-build-log-chunks': buildLogChunks,
  '2026-11-27-111-build-queue': buildQueue,
  '2026-11-27-120-acme-challenges': acmeChallenges,
  '2026-11-28-040-config-pending': configPending,
  '2026-11-28-050-managed-databases': managedDatabases,
  '2026-11-28-055-database-worker': databaseWorker,
  '2026-11-28-070-jobs': jobs,
  '2026-11-28-080-notifications': notifications,
  '2026-11-28-100-schema-version': schemaVersion,
  '2026-11-28-110-build-dockerfile': buildDockerfile,
  '2026-11-28-120-backups': backups,
  '2026-11-28-130-compose': compose,
  '2026-11-28-140-point-in-time': pointInTime,
  '2026-11-28-191-job-service': jobService,
};

const provider: MigrationProvider = { getMigrations: async () => MIGRATIONS };

/** 64-bit integers (PostgreSQL `bigint`) as numbers: every one Slipway stores fits in 2^53. */
const PG_INT8 = 20;

function sqliteDialect(file: string): Dialect {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
  // SQLite gives its WAL and shared-memory files the database file's mode: created 0600, all three are.
  ensurePrivateFile(file);
  for (const companion of [`${file}-wal`, `${file}-shm`]) if (fs.existsSync(companion)) fs.chmodSync(companion, PRIVATE_FILE_MODE);
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  return new SqliteDialect({ database: withStatementCache(sqlite) });
}

/** pg is loaded only for a PostgreSQL URL: most installations never need it, and it slows the start. */
async function postgresDialect(url: string): Promise<Dialect> {
  const { default: pg } = await import('pg');
  const types = {
    getTypeParser: (oid: number, format?: 'text' | 'binary') =>
      oid === PG_INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format),
  };
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 10_000, idleTimeoutMillis: 30_000, types });
  // An idle connection the server drops (a restart, a network cut) is an 'error' on the pool: without
  // a listener that would end the process. The pool discards it; the next query opens a new one.
  pool.on('error', () => undefined);
  // The same for a connection lost while checked out between two statements: its query (or the next
  // one) fails instead, and the pool drops the connection when it comes back.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return new PostgresDialect({ pool });
}

/** The database as it is, not migrated: for a command run beside a server (which owns the migrations) that only reads it. */
export async function connectDatabase(options: { file: string; url?: string | undefined }): Promise<Db> {
  return new Kysely<Database>({ dialect: options.url === undefined ? sqliteDialect(options.file) : await postgresDialect(options.url) });
}

/**
 * Opens the database — PostgreSQL when `url` is given, else the SQLite file (created if needed) —
 * and brings its schema up to date.
 */
export async function openDatabase(options: { file: string; url?: string | undefined }): Promise<Db> {
  const dialect = options.url === undefined ? sqliteDialect(options.file) : await postgresDialect(options.url);
  const db = new Kysely<Database>({ dialect });
  try {
    await refuseNewerSchema(db, Object.keys(MIGRATIONS), VERSION);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined || failed !== undefined) {
    await db.destroy();
    throw new Error(`database migration ${failed?.migrationName ?? ''} failed: ${String(error)}`);
  }
  await recordVersion(db, VERSION, latestMigration(Object.keys(MIGRATIONS)));
  return db;
}

/** The newest migration this Slipway carries (what it records as its schema). */
export function latestMigrationName(): string {
  return latestMigration(Object.keys(MIGRATIONS));
}

/** True when the error is a unique-constraint violation (SQLite or PostgreSQL). */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}

/** The current time as every timestamp column holds it (src/core/now.ts). */
export { nowIso };

/**
 * This installation's id, created on first use. Engine objects carry it as a label, so two
 * installations sharing one engine never remove each other's containers.
 */
export async function instanceId(db: Db): Promise<string> {
  const row = await db.selectFrom('instance').select('id').executeTakeFirst();
  if (row !== undefined) return row.id;
  const id = crypto.randomUUID();
  await db.insertInto('instance').values({ id, created_at: nowIso() }).onConflict((oc) => oc.doNothing()).execute();
  return (await db.selectFrom('instance').select('id').executeTakeFirstOrThrow()).id;
}
