// Migration 2026-11-28-140: point-in-time recovery (decisions §20, `pitr`) — base backups, the archived write-ahead log files, and how far each database's log is archived.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('pitr_base_backups')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // No foreign key: like backups, the objects outlive the database unless deleted with it.
    .addColumn('database_id', 'text', (c) => c.notNull())
    .addColumn('destination_id', 'text', (c) => c.notNull())
    .addColumn('location', 'text', (c) => c.notNull())
    // The log file being written when the backup started: the first one a recovery from it needs.
    .addColumn('start_wal', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint')
    .addColumn('sha256', 'text')
    .addColumn('runner', 'text')
    .addColumn('error', 'text')
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .execute();
  await db.schema.createIndex('pitr_base_backups_database').on('pitr_base_backups').columns(['database_id', 'started_at']).execute();

  await db.schema
    .createTable('pitr_wal_files')
    .addColumn('database_id', 'text', (c) => c.notNull())
    // As the receiver named it (a segment, maybe with .gz, or a timeline's .history).
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('destination_id', 'text', (c) => c.notNull())
    .addColumn('location', 'text', (c) => c.notNull())
    // When the receiver finished writing it: every commit before is in it or an earlier file.
    .addColumn('closed_at', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('uploaded_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('pitr_wal_files_pk', ['database_id', 'name'])
    .execute();

  await db.schema
    .createTable('pitr_state')
    .addColumn('database_id', 'text', (c) => c.primaryKey())
    // Every write committed before this time is in the destination.
    .addColumn('archived_until', 'text')
    .addColumn('error', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('pitr_state').execute();
  await db.schema.dropTable('pitr_wal_files').execute();
  await db.schema.dropTable('pitr_base_backups').execute();
}
