// Migration 2026-11-27-040: preview deployments — a deployment's `previews` flag, and previews as deployment rows linked to their parent.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deployments').addColumn('previews', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  // A preview is a deployment of its own (same lifecycle, routes, builds, logs) pointing at its parent.
  await db.schema.alterTable('deployments').addColumn('parent_id', 'text', (c) => c.references('deployments.id').onDelete('cascade')).execute();
  await db.schema.alterTable('deployments').addColumn('pr_number', 'integer').execute();
  /** The head commit the preview shows (the newest pull request event's). */
  await db.schema.alterTable('deployments').addColumn('pr_head_sha', 'text').execute();
  /** The pull request's head repository as the forge names it (`owner/name`, or a project id). */
  await db.schema.alterTable('deployments').addColumn('pr_head_repo', 'text').execute();
  /** 1 when the head repository is the deployment's own: only then do secrets reach the preview. */
  await db.schema.alterTable('deployments').addColumn('pr_same_repo', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  // One preview per pull request number and deployment, decided by the index.
  await db.schema.createIndex('deployments_parent_pr').on('deployments').columns(['parent_id', 'pr_number']).unique().execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('deployments_parent_pr').execute();
  for (const column of ['pr_same_repo', 'pr_head_repo', 'pr_head_sha', 'pr_number', 'parent_id', 'previews']) {
    await db.schema.alterTable('deployments').dropColumn(column).execute();
  }
}
