// Migration 2026-11-22-002: one table of subdomain claims (deployments and tunnels under one unique
// key), and the control-plane instance that runs each build and holds each tunnel.
import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('subdomain_claims')
    // The primary key decides: two claims of one subdomain (any kinds, any instances) cannot both win.
    .addColumn('subdomain', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('owner_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('subdomain_claims_owner').on('subdomain_claims').columns(['kind', 'owner_id']).execute();
  await sql`insert into subdomain_claims (subdomain, kind, owner_id, user_id, created_at)
            select subdomain, 'deployment', id, user_id, created_at from deployments`.execute(db);
  await sql`insert into subdomain_claims (subdomain, kind, owner_id, user_id, created_at)
            select subdomain, 'tunnel', id, user_id, connected_at from tunnels
            where subdomain not in (select subdomain from subdomain_claims)`.execute(db);
  await sql`delete from tunnels where id not in (select owner_id from subdomain_claims where kind = 'tunnel')`.execute(db);
  // Null: a row from before instances were recorded (start-up recovery treats it as its own).
  await db.schema.alterTable('builds').addColumn('runner', 'text').execute();
  await db.schema.alterTable('tunnels').addColumn('runner', 'text').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('tunnels').dropColumn('runner').execute();
  await db.schema.alterTable('builds').dropColumn('runner').execute();
  await db.schema.dropTable('subdomain_claims').execute();
}
