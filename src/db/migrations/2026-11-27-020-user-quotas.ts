// Migration 2026-11-27-020: per-user quota overrides an admin sets (null: the installation's default).
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('user_quotas')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('deployments', 'integer')
    .addColumn('concurrent_builds', 'integer')
    .addColumn('upload_bytes', 'bigint')
    .addColumn('api_keys', 'integer')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('user_quotas').execute();
}
