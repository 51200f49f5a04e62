// Migration 2026-11-27-110: build logs kept in the database in chunks, so any instance can read and follow them (decisions §15).
import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());
  // No foreign key: a log is removed with its deployment (BuildLogs.removeDeployment), and a chunk
  // appended while its build row is being deleted must not fail the build's last words.
  await db.schema
    .createTable('build_log_chunks')
    .addColumn('id', postgres ? 'bigserial' : 'integer', serial)
    .addColumn('build_id', 'text', (c) => c.notNull())
    .addColumn('deployment_id', 'text', (c) => c.notNull())
    .addColumn('data', sql.raw(postgres ? 'bytea' : 'blob'), (c) => c.notNull())
    .addColumn('final', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('build_log_chunks_build').on('build_log_chunks').columns(['build_id', 'id']).execute();
  await db.schema.createIndex('build_log_chunks_deployment').on('build_log_chunks').column('deployment_id').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('build_log_chunks').execute();
}
