// Migration 2026-11-27-061: uploaded archives kept in the database in chunks, so any instance can build them (decisions §15).
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('upload_archives')
    .addColumn('upload_id', 'text', (c) => c.primaryKey())
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('dockerfile', 'text')
    .addColumn('size', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('upload_chunks')
    .addColumn('upload_id', 'text', (c) => c.notNull().references('upload_archives.upload_id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('data', sql.raw(postgres ? 'bytea' : 'blob'), (c) => c.notNull())
    .addPrimaryKeyConstraint('upload_chunks_pk', ['upload_id', 'seq'])
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('upload_chunks').execute();
  await db.schema.dropTable('upload_archives').execute();
}
