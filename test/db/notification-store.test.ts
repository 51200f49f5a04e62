// The notification store on SQLite and PostgreSQL: URLs and secrets encrypted and bound to their channel, an event written once per key, a lapsed delivery taken over by one instance only.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { databaseNotificationStore } from '../../src/db/notification-store.js';
import type { Db } from '../../src/db/database.js';
import type { AuditRecord } from '../../src/domain/audit.js';
import type { Channel, NotificationStore, OutboxEvent } from '../../src/notifications/notification-store.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { openTestDatabase } from '../helpers/server.js';

const USER = crypto.randomUUID();

describe('notification store', () => {
  let db: Db;
  let close: () => Promise<void>;
  let store: NotificationStore;
  const channel: Channel = {
    id: crypto.randomUUID(), user_id: USER, team_id: null, name: 'hook', type: 'webhook', url: 'https://receiver.example/hook?token=top-secret', email: null,
    secret: 'whsec_shh', events: ['app.crashed'], created_at: '2026-11-28T00:00:00.000Z', updated_at: '2026-11-28T00:00:00.000Z',
  };
  const audit = (action: string): AuditRecord => ({ actor: { userId: USER, via: 'session', ip: null }, event: { action: `notification_channel.${action}`, targetType: 'notification_channel', targetId: channel.id, teamId: null } });
  const event = (key: string): OutboxEvent => ({ id: crypto.randomUUID(), dedupeKey: key, type: 'app.crashed', payload: '{}', at: new Date().toISOString() });

  before(async () => {
    ({ db, close } = await openTestDatabase('notification-store', [USER]));
    store = databaseNotificationStore(db, new ValueCipher(crypto.randomBytes(32)));
    await store.createChannel(channel, audit('create'));
  });
  after(async () => {
    await close?.();
  });

  test('the URL and the secret are ciphertext at rest, bound to their channel, and read back in clear', async () => {
    const row = await db.selectFrom('notification_channels').selectAll().where('id', '=', channel.id).executeTakeFirstOrThrow();
    assert.ok(!row.url?.includes('top-secret') && !row.secret?.includes('shh'));
    assert.deepEqual(await store.channel(channel.id), channel);
    const other = crypto.randomUUID();
    await db.insertInto('notification_channels').values({ ...row, id: other }).execute();
    await assert.rejects(store.channel(other), 'a ciphertext copied to another channel does not open');
    await db.deleteFrom('notification_channels').where('id', '=', other).execute();
    assert.deepEqual((await store.channelsFor('app.crashed', { userId: USER, teamId: null })).map((c) => c.id), [channel.id]);
    assert.deepEqual(await store.channelsFor('deploy.failed', { userId: USER, teamId: null }), []);
  });

  test('an event is written once per key; a lapsed claim is taken over by one instance, once', async () => {
    const past = new Date(Date.now() - 1_000).toISOString();
    const first = await store.enqueue(event('app.crashed:r1:s1'), [{ id: crypto.randomUUID(), channelId: channel.id }], 'instance-a', past);
    assert.equal(first?.length, 1);
    assert.equal(await store.enqueue(event('app.crashed:r1:s1'), [{ id: crypto.randomUUID(), channelId: channel.id }], 'instance-b', past), undefined);

    const now = new Date().toISOString();
    const later = new Date(Date.now() + 30_000).toISOString();
    const [b, c] = await Promise.all([store.claimDue('instance-b', now, later, 10), store.claimDue('instance-c', now, later, 10)]);
    assert.equal(b.length + c.length, 1, 'one instance holds it');
    assert.equal([...b, ...c][0]?.id, first?.[0]?.id);
    assert.deepEqual(await store.claimDue('instance-d', now, later, 10), [], 'held: nobody else takes it');

    await store.recordAttempt(first?.[0]?.id ?? '', { outcome: 'delivered', attempts: 2, statusCode: 200, error: null });
    const [delivery] = await store.deliveries(channel.id, 10);
    assert.deepEqual([delivery?.outcome, delivery?.attempts, delivery?.status_code, delivery?.event], ['delivered', 2, 200, 'app.crashed']);
    await store.deleteChannel(channel.id, audit('delete'));
    assert.deepEqual(await store.deliveries(channel.id, 10), [], 'its log goes with it');
  });
});
