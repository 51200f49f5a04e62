// Migration 2026-11-27-030: teams and their members, deployments of a team, the audit log, two-factor login.
import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serialType = postgres ? 'serial' : 'integer';
  const serial = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement());

  await db.schema
    .createTable('teams')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('team_members')
    .addColumn('team_id', 'text', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('team_members_pk', ['team_id', 'user_id'])
    .execute();
  await db.schema.createIndex('team_members_user').on('team_members').columns(['user_id', 'team_id']).execute();

  // A team's deployment: null for one that belongs to its creator alone. A team holding deployments cannot be deleted.
  await db.schema.alterTable('deployments').addColumn('team_id', 'text', (c) => c.references('teams.id')).execute();
  await db.schema.createIndex('deployments_team_seq').on('deployments').columns(['team_id', 'seq']).execute();

  await db.schema
    .createTable('audit_log')
    .addColumn('seq', serialType, serial)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('at', 'text', (c) => c.notNull())
    // No foreign keys: an entry outlives the user, team and object it names.
    .addColumn('actor_id', 'text')
    .addColumn('actor_email', 'text')
    .addColumn('via', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('target_type', 'text', (c) => c.notNull())
    .addColumn('target_id', 'text')
    .addColumn('team_id', 'text')
    .addColumn('ip', 'text')
    .addColumn('outcome', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('audit_log_actor').on('audit_log').columns(['actor_id', 'seq']).execute();
  await db.schema.createIndex('audit_log_team').on('audit_log').columns(['team_id', 'seq']).execute();
  await db.schema.createIndex('audit_log_target').on('audit_log').columns(['target_id', 'seq']).execute();
  await db.schema.createIndex('audit_log_at').on('audit_log').column('at').execute();

  // Two-factor login: the TOTP secret, AES-256-GCM ciphertext under the installation key; pending until confirmed.
  await db.schema.alterTable('users').addColumn('totp_secret', 'text').execute();
  await db.schema.alterTable('users').addColumn('totp_enabled', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  // The last time step whose code was accepted: a code is usable once.
  await db.schema.alterTable('users').addColumn('totp_last_step', 'integer').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('users').dropColumn('totp_last_step').execute();
  await db.schema.alterTable('users').dropColumn('totp_enabled').execute();
  await db.schema.alterTable('users').dropColumn('totp_secret').execute();
  await db.schema.dropTable('audit_log').execute();
  await db.schema.dropIndex('deployments_team_seq').execute();
  await db.schema.alterTable('deployments').dropColumn('team_id').execute();
  await db.schema.dropTable('team_members').execute();
  await db.schema.dropTable('teams').execute();
}
