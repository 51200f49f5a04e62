// Migration 2026-11-28-050: managed databases (decisions §19), their links to deployments, and a per-user quota on them.
import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serialType = postgres ? 'serial' : 'integer';
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());

  await db.schema
    .createTable('managed_databases')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('engine', 'text', (c) => c.notNull())
    .addColumn('image', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    .addColumn('team_id', 'text', (c) => c.references('teams.id'))
    // Names are unique per owner: the team's, else the user's (one column, so one unique index decides).
    .addColumn('owner_key', 'text', (c) => c.notNull())
    // AES-256-GCM ciphertext of {username, password, database} under the installation key.
    .addColumn('credentials', 'text', (c) => c.notNull())
    .addColumn('memory_bytes', 'bigint')
    .addColumn('nano_cpus', 'bigint')
    .addColumn('container_id', 'text')
    .addColumn('size_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('managed_databases_owner_name').unique().on('managed_databases').columns(['owner_key', 'name']).execute();
  await db.schema.createIndex('managed_databases_user_seq').on('managed_databases').columns(['user_id', 'seq']).execute();
  await db.schema.createIndex('managed_databases_team_seq').on('managed_databases').columns(['team_id', 'seq']).execute();

  await db.schema
    .createTable('database_links')
    .addColumn('database_id', 'text', (c) => c.notNull().references('managed_databases.id').onDelete('cascade'))
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('database_links_pk', ['database_id', 'deployment_id'])
    .execute();
  await db.schema.createIndex('database_links_deployment_env').unique().on('database_links').columns(['deployment_id', 'env']).execute();

  await db.schema.alterTable('user_quotas').addColumn('databases', 'integer').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('user_quotas').dropColumn('databases').execute();
  await db.schema.dropTable('database_links').execute();
  await db.schema.dropTable('managed_databases').execute();
}
