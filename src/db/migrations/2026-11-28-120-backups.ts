// Migration 2026-11-28-120: backups (decisions §20) — destinations (secret encrypted), backup records, each database's schedule, and the claims that make a due backup run once.
import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serialType = postgres ? 'serial' : 'integer';
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());

  await db.schema
    .createTable('backup_destinations')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    .addColumn('team_id', 'text', (c) => c.references('teams.id'))
    .addColumn('owner_key', 'text', (c) => c.notNull())
    // The non-secret settings as JSON (endpoint, region, bucket, prefix, access key id, path style).
    .addColumn('settings', 'text', (c) => c.notNull())
    // AES-256-GCM ciphertext of the secret access key under the installation key (null for `local`).
    .addColumn('secret', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('backup_destinations_owner_name').unique().on('backup_destinations').columns(['owner_key', 'name']).execute();

  await db.schema
    .createTable('backups')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    // No foreign key: a database's backups outlive it unless deleted with it.
    .addColumn('database_id', 'text', (c) => c.notNull())
    .addColumn('database_name', 'text', (c) => c.notNull())
    .addColumn('engine', 'text', (c) => c.notNull())
    .addColumn('image', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('team_id', 'text')
    .addColumn('destination_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint')
    .addColumn('sha256', 'text')
    .addColumn('location', 'text', (c) => c.notNull())
    // JSON: what the source held at dump time (tables and row counts, or a key count), for verification.
    .addColumn('source_counts', 'text')
    .addColumn('runner', 'text')
    // The schedule's due time a scheduled backup was taken for (unique per database: taken once).
    .addColumn('due_at', 'text')
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .addColumn('verified_at', 'text')
    .addColumn('error', 'text')
    .execute();
  await db.schema.createIndex('backups_database_seq').on('backups').columns(['database_id', 'seq']).execute();
  await db.schema.createIndex('backups_database_due').unique().on('backups').columns(['database_id', 'due_at']).execute();

  await db.schema
    .createTable('backup_restores')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('database_id', 'text', (c) => c.notNull())
    .addColumn('backup_id', 'text', (c) => c.notNull())
    .addColumn('target_database_id', 'text', (c) => c.notNull())
    .addColumn('safety_backup_id', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .execute();

  await db.schema
    .createTable('backup_schedules')
    .addColumn('database_id', 'text', (c) => c.primaryKey().references('managed_databases.id').onDelete('cascade'))
    .addColumn('schedule', 'text', (c) => c.notNull())
    .addColumn('destination_id', 'text', (c) => c.notNull())
    .addColumn('keep', 'integer', (c) => c.notNull())
    .addColumn('pitr', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('backup_schedules').execute();
  await db.schema.dropTable('backup_restores').execute();
  await db.schema.dropTable('backups').execute();
  await db.schema.dropTable('backup_destinations').execute();
}
