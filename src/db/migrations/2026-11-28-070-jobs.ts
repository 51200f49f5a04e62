// Migration 2026-11-28-070: scheduled jobs (decisions §22), their runs (one per due time, claimed once across instances) and the runs' logs.
import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());

  await db.schema
    .createTable('jobs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('schedule', 'text', (c) => c.notNull())
    // JSON array of strings: the argv.
    .addColumn('command', 'text', (c) => c.notNull())
    .addColumn('timezone', 'text', (c) => c.notNull())
    .addColumn('timeout_seconds', 'integer', (c) => c.notNull())
    .addColumn('concurrency', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('jobs_deployment_name').unique().on('jobs').columns(['deployment_id', 'name']).execute();

  await db.schema
    .createTable('job_runs')
    .addColumn('seq', postgres ? 'bigserial' : 'integer', serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('job_id', 'text', (c) => c.notNull().references('jobs.id').onDelete('cascade'))
    .addColumn('deployment_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('due_at', 'text')
    .addColumn('exit_code', 'integer')
    .addColumn('message', 'text')
    .addColumn('instance', 'text')
    .addColumn('container_id', 'text')
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .execute();
  // Exactly once per due time across instances: the first instance to insert it runs it (manual runs have none: NULLs never collide).
  await db.schema.createIndex('job_runs_due').unique().on('job_runs').columns(['job_id', 'due_at']).execute();
  await db.schema.createIndex('job_runs_job_seq').on('job_runs').columns(['job_id', 'seq']).execute();
  await db.schema.createIndex('job_runs_status').on('job_runs').column('status').execute();

  await db.schema
    .createTable('job_run_logs')
    .addColumn('id', postgres ? 'bigserial' : 'integer', serial)
    .addColumn('run_id', 'text', (c) => c.notNull().references('job_runs.id').onDelete('cascade'))
    .addColumn('data', sql.raw(postgres ? 'bytea' : 'blob'), (c) => c.notNull())
    .addColumn('final', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('job_run_logs_run').on('job_run_logs').columns(['run_id', 'id']).execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('job_run_logs').execute();
  await db.schema.dropTable('job_runs').execute();
  await db.schema.dropTable('jobs').execute();
}
