// Migration 2026-11-28-100: which Slipway versions have run on this database, with the newest migration each knew.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('slipway_versions')
    .addColumn('version', 'text', (c) => c.notNull())
    // The newest migration that version carries: a later Slipway that finds migrations it does not know names the version that ran them.
    .addColumn('schema', 'text', (c) => c.notNull())
    .addColumn('first_started_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('slipway_versions_pk', ['version', 'schema'])
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('slipway_versions').execute();
}
