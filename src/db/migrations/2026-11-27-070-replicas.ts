// Migration 2026-11-27-070: deployments' replicas, and a release's upstreams (host and port, one per replica) instead of one loopback host port.
import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deployments').addColumn('replicas', 'integer', (c) => c.notNull().defaultTo(1)).execute();
  await db.schema.alterTable('builds').addColumn('upstreams', 'text').execute();
  // A stored host port was always published on loopback (the one-engine runtime).
  await db
    .updateTable('builds')
    .set({ upstreams: sql`'[{"host":"127.0.0.1","port":' || host_port || '}]'` })
    .where('host_port', 'is not', null)
    .execute();
  await db.schema.alterTable('builds').dropColumn('host_port').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('builds').addColumn('host_port', 'integer').execute();
  await db.schema.alterTable('builds').dropColumn('upstreams').execute();
  await db.schema.alterTable('deployments').dropColumn('replicas').execute();
}
