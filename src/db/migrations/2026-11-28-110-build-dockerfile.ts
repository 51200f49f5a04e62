// Migration 2026-11-28-110: the Dockerfile each build used (its own, or the one Slipway generated and why), decisions §24.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // A new table rather than columns on builds: only added, so instances of the previous version keep working.
  await db.schema
    .createTable('build_dockerfiles')
    .addColumn('build_id', 'text', (c) => c.primaryKey().references('builds.id').onDelete('cascade'))
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('dockerfile', 'text', (c) => c.notNull())
    .addColumn('generated', 'integer', (c) => c.notNull())
    // JSON array of the detection's lines (what was found and why); null for the source's own Dockerfile.
    .addColumn('detection', 'text')
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('build_dockerfiles').execute();
}
