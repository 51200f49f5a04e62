// Migration 2026-11-27-120: ACME challenge answers in the database (every instance answers them), and stopped releases recorded as serving nothing.
import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('acme_challenges')
    .addColumn('token', 'text', (c) => c.primaryKey())
    .addColumn('key_authorization', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  // "Is it serving" is read from the store (a live release's upstreams): a stopped deployment's
  // release serves nothing, which its route already said.
  await sql`update builds set upstreams = '[]' where id in (select live_build_id from deployments where status = 'stopped' and live_build_id is not null)`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('acme_challenges').execute();
}
