// The notification store on the database: channel URLs and secrets AES-256-GCM encrypted and bound to their channel; the outbox and its deliveries with claims.
import type { AppEventType } from '../domain/app-events.js';
import type { Channel, ChannelType, ClaimedDelivery, Delivery, DeliveryOutcome, NotificationStore } from '../notifications/notification-store.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { appendRecord } from './audit-log.js';
import type { Db } from './database.js';
import type { NotificationChannelsTable } from './schema.js';

/** Associated data of a channel's URL and secret: a ciphertext only opens for the channel (and the field) it was written for. */
const context = (channelId: string, field: 'url' | 'secret'): string => `notification:${channelId}:${field}`;

const DELIVERY_COLUMNS = ['id', 'channel_id', 'event_id', 'event', 'at', 'outcome', 'attempts', 'status_code', 'error'] as const;

/** NotificationStore over `notification_channels`, `notification_events` and `notification_deliveries`. */
export function databaseNotificationStore(db: Db, cipher: ValueCipher): NotificationStore {
  const open = (row: NotificationChannelsTable): Channel => ({
    id: row.id,
    user_id: row.user_id,
    team_id: row.team_id,
    name: row.name,
    type: row.type as ChannelType,
    url: row.url === null ? null : cipher.decrypt(row.url, context(row.id, 'url')),
    email: row.email,
    secret: row.secret === null ? null : cipher.decrypt(row.secret, context(row.id, 'secret')),
    events: JSON.parse(row.events) as AppEventType[],
    created_at: row.created_at,
    updated_at: row.updated_at,
  });
  const seal = (id: string, field: 'url' | 'secret', value: string | null): string | null => (value === null ? null : cipher.encrypt(value, context(id, field)));
  const delivery = (row: Omit<Delivery, 'outcome'> & { outcome: string }): Delivery => ({ ...row, outcome: row.outcome as DeliveryOutcome });

  return {
    async createChannel(channel, audit) {
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('notification_channels')
          .values({ ...channel, url: seal(channel.id, 'url', channel.url), secret: seal(channel.id, 'secret', channel.secret), events: JSON.stringify(channel.events) })
          .execute();
        await appendRecord(trx, audit);
      });
    },

    async channel(id) {
      const row = await db.selectFrom('notification_channels').selectAll().where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : open(row);
    },

    async listChannels(userId, teamIds) {
      const rows = await db
        .selectFrom('notification_channels')
        .selectAll()
        .where((eb) => (teamIds.length === 0 ? eb.and([eb('user_id', '=', userId), eb('team_id', 'is', null)]) : eb.or([eb.and([eb('user_id', '=', userId), eb('team_id', 'is', null)]), eb('team_id', 'in', teamIds)])))
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      return rows.map(open);
    },

    async updateChannel(id, changes, at, audit) {
      const set: Partial<NotificationChannelsTable> = { updated_at: at };
      if (changes.name !== undefined) set.name = changes.name;
      if (changes.url !== undefined) set.url = seal(id, 'url', changes.url);
      if (changes.email !== undefined) set.email = changes.email;
      if (changes.secret !== undefined) set.secret = seal(id, 'secret', changes.secret);
      if (changes.events !== undefined) set.events = JSON.stringify(changes.events);
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('notification_channels').set(set).where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    async deleteChannel(id, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('notification_channels').where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    async ownerOf(ref) {
      if (ref.deploymentId !== undefined) {
        const row = await db.selectFrom('deployments').select(['user_id', 'team_id']).where('id', '=', ref.deploymentId).executeTakeFirst();
        return row === undefined ? undefined : { userId: row.user_id, teamId: row.team_id };
      }
      if (ref.databaseId !== undefined) {
        const row = await db.selectFrom('managed_databases').select(['user_id', 'team_id']).where('id', '=', ref.databaseId).executeTakeFirst();
        return row === undefined ? undefined : { userId: row.user_id, teamId: row.team_id };
      }
      return undefined;
    },

    async channelsFor(type, owner) {
      let query = db.selectFrom('notification_channels').selectAll('notification_channels');
      if (owner === 'admins') {
        query = query.innerJoin('users', 'users.id', 'notification_channels.user_id').where('users.is_admin', '=', 1).where('notification_channels.team_id', 'is', null);
      } else if (owner.teamId !== null) {
        query = query.where('notification_channels.team_id', '=', owner.teamId);
      } else {
        query = query.where('notification_channels.user_id', '=', owner.userId).where('notification_channels.team_id', 'is', null);
      }
      // The events column is a short JSON array: filtered here rather than with each dialect's JSON functions.
      return (await query.execute()).map(open).filter((c) => c.events.includes(type));
    },

    async enqueue(event, deliveries, claimedBy, claimedUntil) {
      return db.transaction().execute(async (trx) => {
        const inserted = await trx
          .insertInto('notification_events')
          .values({ id: event.id, dedupe_key: event.dedupeKey, type: event.type, payload: event.payload, at: event.at })
          .onConflict((oc) => oc.column('dedupe_key').doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) return undefined;
        const rows = deliveries.map((d) => ({
          id: d.id,
          channel_id: d.channelId,
          event_id: event.id,
          event: event.type,
          at: event.at,
          outcome: 'pending',
          attempts: 0,
          status_code: null,
          error: null,
          next_attempt_at: event.at,
          claimed_by: claimedBy,
          claimed_until: claimedUntil,
        }));
        if (rows.length > 0) await trx.insertInto('notification_deliveries').values(rows).execute();
        return rows.map((r) => ({ ...delivery(r), payload: event.payload }));
      });
    },

    async claimDue(claimedBy, now, claimedUntil, limit) {
      const candidates = await db
        .selectFrom('notification_deliveries')
        .select('id')
        .where('outcome', '=', 'pending')
        .where('next_attempt_at', '<=', now)
        .where((eb) => eb.or([eb('claimed_until', 'is', null), eb('claimed_until', '<', now)]))
        .orderBy('next_attempt_at')
        .limit(limit)
        .execute();
      const claimed: ClaimedDelivery[] = [];
      for (const { id } of candidates) {
        // The conditional update decides between instances: the one whose update changed the row holds it.
        const taken = await db
          .updateTable('notification_deliveries')
          .set({ claimed_by: claimedBy, claimed_until: claimedUntil })
          .where('id', '=', id)
          .where('outcome', '=', 'pending')
          .where((eb) => eb.or([eb('claimed_until', 'is', null), eb('claimed_until', '<', now)]))
          .executeTakeFirst();
        if (Number(taken.numUpdatedRows) !== 1) continue;
        const row = await db
          .selectFrom('notification_deliveries')
          .innerJoin('notification_events', 'notification_events.id', 'notification_deliveries.event_id')
          .select(DELIVERY_COLUMNS.map((c) => `notification_deliveries.${c}` as const))
          .select('notification_events.payload')
          .where('notification_deliveries.id', '=', id)
          .executeTakeFirst();
        if (row !== undefined) claimed.push({ ...delivery(row), payload: row.payload });
      }
      return claimed;
    },

    async recordAttempt(id, result) {
      await db
        .updateTable('notification_deliveries')
        .set({
          outcome: result.outcome,
          attempts: result.attempts,
          status_code: result.statusCode,
          error: result.error,
          ...(result.nextAttemptAt === undefined ? {} : { next_attempt_at: result.nextAttemptAt }),
          ...(result.claimedUntil === undefined ? {} : { claimed_until: result.claimedUntil }),
        })
        .where('id', '=', id)
        .execute();
    },

    async recordTest(channelId, test) {
      // Its own event row (the delivery log's rows hang from events); never pending, so no sweep takes it.
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('notification_events').values({ id: test.id, dedupe_key: `test:${test.id}`, type: 'test', payload: test.payload, at: test.at }).execute();
        await trx
          .insertInto('notification_deliveries')
          .values({
            id: test.id,
            channel_id: channelId,
            event_id: test.id,
            event: 'test',
            at: test.at,
            outcome: test.outcome,
            attempts: 1,
            status_code: test.statusCode,
            error: test.error,
            next_attempt_at: test.at,
            claimed_by: null,
            claimed_until: null,
          })
          .execute();
      });
    },

    async deliveries(channelId, limit) {
      const rows = await db.selectFrom('notification_deliveries').select(DELIVERY_COLUMNS).where('channel_id', '=', channelId).orderBy('at', 'desc').orderBy('id').limit(limit).execute();
      return rows.map(delivery);
    },

    async prune(before) {
      await db.deleteFrom('notification_events').where('at', '<', before).execute();
    },
  };
}
