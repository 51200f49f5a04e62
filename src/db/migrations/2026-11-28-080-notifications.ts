// Migration 2026-11-28-080: notification channels (decisions §23), the outbox of events they are told, and one delivery per channel and event.
import type { Kysely } from 'kysely';

// Migrations are frozen in time, so they are written against Kysely<any>, not the current schema.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('notification_channels')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('team_id', 'text', (c) => c.references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    // AES-256-GCM ciphertext under the installation key (a channel URL is a credential).
    .addColumn('url', 'text')
    .addColumn('email', 'text')
    // The webhook signing secret, encrypted like the URL.
    .addColumn('secret', 'text')
    // A JSON array of event types.
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('notification_channels_user').on('notification_channels').columns(['user_id', 'created_at']).execute();
  await db.schema.createIndex('notification_channels_team').on('notification_channels').columns(['team_id', 'created_at']).execute();

  // One row per event, whichever instances saw it: the unique key decides which one writes its deliveries.
  await db.schema
    .createTable('notification_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('dedupe_key', 'text', (c) => c.notNull().unique())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('notification_events_at').on('notification_events').column('at').execute();

  await db.schema
    .createTable('notification_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('channel_id', 'text', (c) => c.notNull().references('notification_channels.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull().references('notification_events.id').onDelete('cascade'))
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('status_code', 'integer')
    .addColumn('error', 'text')
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    // The instance sending it, until when (a lost instance's deliveries are taken over after that).
    .addColumn('claimed_by', 'text')
    .addColumn('claimed_until', 'text')
    .execute();
  await db.schema.createIndex('notification_deliveries_channel').on('notification_deliveries').columns(['channel_id', 'at']).execute();
  await db.schema.createIndex('notification_deliveries_pending').on('notification_deliveries').columns(['outcome', 'next_attempt_at']).execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('notification_deliveries').execute();
  await db.schema.dropTable('notification_events').execute();
  await db.schema.dropTable('notification_channels').execute();
}
