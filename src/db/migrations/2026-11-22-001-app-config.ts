// Migration 2026-11-22-001: app configuration — encrypted variables, each build's configuration, volumes, the key check.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  // Proves at start that the installation key is the one that encrypted the values below.
  await db.schema.alterTable('instance').addColumn('key_check', 'text').execute();

  await db.schema
    .createTable('env_vars')
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    // AES-256-GCM ciphertext (src/secrets/value-cipher.ts), never the value itself.
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('secret', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('env_vars_pk', ['deployment_id', 'key'])
    .execute();

  await db.schema
    .createTable('build_configs')
    .addColumn('build_id', 'text', (c) => c.primaryKey().references('builds.id').onDelete('cascade'))
    // The variables the build was released with, as one encrypted JSON document.
    .addColumn('config', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  // [{name, mount_path}] as JSON: named engine volumes mounted into every release.
  await db.schema.alterTable('deployments').addColumn('volumes', 'text', (c) => c.notNull().defaultTo('[]')).execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deployments').dropColumn('volumes').execute();
  await db.schema.dropTable('build_configs').execute();
  await db.schema.dropTable('env_vars').execute();
  await db.schema.alterTable('instance').dropColumn('key_check').execute();
}
