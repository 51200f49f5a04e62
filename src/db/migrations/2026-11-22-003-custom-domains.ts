// Migration 2026-11-22-003: custom domains of deployments, certificates per served host, the ACME account.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('custom_domains')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // Deleting a deployment frees its domains.
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    // Lower case A-label; the unique index decides between two users adding one name at once.
    .addColumn('hostname', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('custom_domains_deployment').on('custom_domains').column('deployment_id').execute();

  // One row per host that has (or is getting) a certificate from the ACME CA.
  await db.schema
    .createTable('certificates')
    .addColumn('hostname', 'text', (c) => c.primaryKey())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('cert_pem', 'text')
    // AES-256-GCM ciphertext under the installation key (src/secrets/value-cipher.ts), never the key itself.
    .addColumn('key_pem', 'text')
    .addColumn('expires_at', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('acme_accounts')
    .addColumn('directory_url', 'text', (c) => c.primaryKey())
    // Encrypted like the certificates' keys.
    .addColumn('key_pem', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('acme_accounts').execute();
  await db.schema.dropTable('certificates').execute();
  await db.schema.dropTable('custom_domains').execute();
}
