// Migration 2026-11-28-191: the compose service a scheduled job runs in (decisions §22: "for compose, `service` picks which"); null: the web service's image.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // A nullable column only: instances of the previous version keep reading and writing jobs during a rolling upgrade.
  await db.schema.alterTable('jobs').addColumn('service', 'text').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('jobs').dropColumn('service').execute();
}
