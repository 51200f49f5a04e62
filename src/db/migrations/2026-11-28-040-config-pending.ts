// Migration 2026-11-28-040: configuration changed since a deployment's release (which keys), recorded on the server so every view tells it.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // JSON array of the changed keys (variable names, `volumes`, `memory_mb`…); null: nothing pending.
  await db.schema.alterTable('deployments').addColumn('config_pending', 'text').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deployments').dropColumn('config_pending').execute();
}
