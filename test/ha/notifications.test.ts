// Notifications across two instances on one PostgreSQL (decisions §15, §23): an event both instances see is one message; each distinct event is one more.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AppCrashedEvent } from '../../src/domain/app-events.js';
import { eventually } from '../helpers/apps.js';
import { startHttpReceiver, type HttpReceiver } from '../helpers/receivers.js';
import { startTestServer, testDatabase, type TestServer } from '../helpers/server.js';

describe('notifications across instances on one PostgreSQL', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  let a: TestServer;
  let b: TestServer;
  let receiver: HttpReceiver;
  let token: string;
  let channelId: string;
  let app: { id: string; subdomain: string };

  before(async () => {
    receiver = await startHttpReceiver();
    const shared = { SLIPWAY_DATABASE_URL: database.url, SLIPWAY_SECRET_KEY: crypto.randomBytes(32).toString('base64'), SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true' };
    a = await startTestServer(shared, fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-notify-a-')));
    b = await startTestServer(shared, fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-notify-b-')));
    const user = await a.newUser('ha-notify');
    token = user.token;
    const channel = await b.request('POST', '/api/v1/notification-channels', { token, body: { name: 'hook', type: 'webhook', url: `${receiver.url}/hook`, events: ['app.crashed'] } });
    assert.equal(channel.status, 201, channel.text);
    channelId = channel.json.id as string;
    const created = await a.request('POST', '/api/v1/deployments', { token, body: { name: `ha-notify-${process.pid}`, subdomain: `ha-notify-${process.pid}`, source_type: 'archive' } });
    assert.equal(created.status, 201, created.text);
    app = { id: created.json.id as string, subdomain: created.json.subdomain as string };
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await receiver?.close();
    await database.drop();
  });

  test('the same event seen by both instances at once is sent once; another event is one more message', async () => {
    const crash = (): AppCrashedEvent => ({ type: 'app.crashed', deploymentId: app.id, subdomain: app.subdomain, releaseId: crypto.randomUUID(), since: new Date().toISOString(), restarts: 3, exitCode: 1, lastLine: null });
    const first = crash();
    a.server.appEvents.emit(first);
    b.server.appEvents.emit(first);
    const second = crash();
    b.server.appEvents.emit(second);
    a.server.appEvents.emit(second);
    a.server.appEvents.emit(second);

    const deliveries = await eventually(async () => {
      const res = await a.request('GET', `/api/v1/notification-channels/${channelId}/deliveries`, { token });
      const list = res.json as Array<{ id: string; outcome: string }>;
      return list.length >= 2 && list.every((d) => d.outcome === 'delivered') ? list : undefined;
    }, 20_000, 'two deliveries');
    // Longer than a sweep of either instance (2 s): nothing more arrives.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    assert.equal(receiver.on('/hook').length, 2, receiver.on('/hook').map((r) => r.body.toString()).join('\n'));
    assert.equal((await b.request('GET', `/api/v1/notification-channels/${channelId}/deliveries`, { token })).json.length, 2);
    assert.deepEqual(new Set(receiver.on('/hook').map((r) => JSON.parse(r.body.toString()).id)), new Set(deliveries.map((d) => d.id)));
  });
});
