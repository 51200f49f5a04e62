// Migration 2026-11-28-130: multi-service apps (contract §21): a deployment's compose file, and the set of services each build releases.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // The compose file's path in the source; null: the deployment builds its Dockerfile.
  await db.schema.alterTable('deployments').addColumn('compose_path', 'text').execute();
  // JSON of the release set (src/runtime/release-set.ts) a compose build releases; null: a single image.
  await db.schema.alterTable('builds').addColumn('release_set', 'text').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('builds').dropColumn('release_set').execute();
  await db.schema.alterTable('deployments').dropColumn('compose_path').execute();
}
