// Migration 2026-11-28-055: which instance is bringing a managed database up, so another can finish the work when that instance is gone.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // The runner id (instances.id) of the instance creating or starting it; null: nobody yet.
  await db.schema.alterTable('managed_databases').addColumn('worker_instance', 'text').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('managed_databases').dropColumn('worker_instance').execute();
}
