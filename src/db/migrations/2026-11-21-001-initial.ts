// Migration 2026-11-21-001: users, sessions, API keys, deployments, builds, tunnels.
import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // The two dialects spell an auto-incrementing key and a 64-bit integer differently.
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serialType = postgres ? 'serial' : 'integer';
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());
  const big = postgres ? 'bigint' : 'integer';
  await db.schema
    .createTable('users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('is_admin', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sessions_user_id').on('sessions').column('user_id').execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_prefix', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .execute();
  await db.schema.createIndex('api_keys_user_id').on('api_keys').column('user_id').execute();

  await db.schema
    .createTable('deployments')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('subdomain', 'text', (c) => c.notNull())
    .addColumn('source_type', 'text', (c) => c.notNull())
    .addColumn('repo_url', 'text')
    .addColumn('branch', 'text')
    .addColumn('dockerfile_path', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('upload_id', 'text')
    .addColumn('upload_size', big)
    .addColumn('upload_sha256', 'text')
    .addColumn('live_build_id', 'text')
    .addColumn('health_check_path', 'text')
    .addColumn('memory_bytes', big)
    .addColumn('nano_cpus', big)
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  // The subdomain's uniqueness is decided here, so concurrent creates cannot both win.
  await db.schema.createIndex('deployments_subdomain').on('deployments').column('subdomain').unique().execute();
  await db.schema.createIndex('deployments_user_id').on('deployments').columns(['user_id', 'seq']).execute();

  await db.schema
    .createTable('builds')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('commit_sha', 'text', (c) => c.notNull())
    .addColumn('source_ref', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('image_id', 'text')
    .addColumn('container_id', 'text')
    .addColumn('host_port', 'integer')
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .execute();
  await db.schema.createIndex('builds_deployment_id').on('builds').columns(['deployment_id', 'seq']).execute();

  await db.schema
    .createTable('tunnels')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('api_key_id', 'text', (c) => c.notNull())
    .addColumn('subdomain', 'text', (c) => c.notNull().unique())
    .addColumn('connected_at', 'text', (c) => c.notNull())
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['tunnels', 'builds', 'deployments', 'api_keys', 'sessions', 'users']) {
    await db.schema.dropTable(table).execute();
  }
}
