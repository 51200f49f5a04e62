// Migration 2026-11-22-004: deploy on push — auto_deploy, each deployment's webhook secret, and the deliveries it received.
import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serialType = postgres ? 'serial' : 'integer';
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());

  await db.schema.alterTable('deployments').addColumn('auto_deploy', 'integer', (c) => c.notNull().defaultTo(0)).execute();

  await db.schema
    .createTable('webhooks')
    .addColumn('deployment_id', 'text', (c) => c.primaryKey().references('deployments.id').onDelete('cascade'))
    // AES-256-GCM ciphertext of the shared secret (src/secrets/value-cipher.ts): it must be read back to check HMACs.
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('received_at', 'text', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('event', 'text')
    .addColumn('delivery_id', 'text')
    // The delivery id while it still blocks a repeat (verified deliveries, for 24 h); unique per deployment,
    // so two copies of one delivery arriving at once cannot both deploy.
    .addColumn('dedup_key', 'text')
    .addColumn('ref', 'text')
    .addColumn('commit_sha', 'text')
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('build_id', 'text')
    .addColumn('reason', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_deliveries_deployment').on('webhook_deliveries').columns(['deployment_id', 'seq']).execute();
  await db.schema.createIndex('webhook_deliveries_dedup').on('webhook_deliveries').columns(['deployment_id', 'dedup_key']).unique().execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('webhook_deliveries').execute();
  await db.schema.dropTable('webhooks').execute();
  await db.schema.alterTable('deployments').dropColumn('auto_deploy').execute();
}
