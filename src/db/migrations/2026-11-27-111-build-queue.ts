// Migration 2026-11-27-111: one build queue for every instance sharing the database (decisions §15).
import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());
  // No foreign key to builds: a row outliving its build (deleted meanwhile) is dropped when taken.
  await db.schema
    .createTable('build_queue')
    .addColumn('seq', postgres ? 'bigserial' : 'integer', serial)
    .addColumn('build_id', 'text', (c) => c.notNull().unique())
    .addColumn('deployment_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('queued_by', 'text', (c) => c.notNull())
    .addColumn('lost_from', 'text')
    // The database's clock (every instance compares with the same one).
    .addColumn('queued_at', sql.raw(postgres ? 'timestamptz' : 'text'), (c) => c.notNull().defaultTo(sql`CURRENT_TIMESTAMP`))
    .addColumn('taken_by', 'text')
    .addColumn('taken_at', 'text')
    .execute();
  await db.schema.createIndex('build_queue_taken_by').on('build_queue').columns(['taken_by', 'seq']).execute();
  await db.schema.createIndex('build_queue_deployment').on('build_queue').column('deployment_id').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('build_queue').execute();
}
