// The instance registry on the database: heartbeats, live and lost, leaders only while live, the day-old dropped.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Db } from '../../src/db/database.js';
import { databaseInstanceRegistry } from '../../src/db/instance-registry.js';
import { openTestDatabase } from '../helpers/server.js';

describe('instance registry', () => {
  let db: Db;
  let close: () => Promise<void>;
  before(async () => {
    ({ db, close } = await openTestDatabase('registry', []));
  });
  after(async () => close());

  it('lists heartbeats as live, a silent instance as lost (leading nothing), and drops one silent for a day', async () => {
    const registry = databaseInstanceRegistry(db);
    const beat = { version: '1.2.3', startedAt: '2026-11-27T10:00:00.000Z' };
    await registry.heartbeat({ id: 'a', url: 'http://10.0.0.1:8080', leader: true, buildsRunning: 2, ...beat });
    await registry.heartbeat({ id: 'b', url: null, leader: false, buildsRunning: 0, ...beat });
    // A heartbeat again updates, never duplicates.
    await registry.heartbeat({ id: 'a', url: 'http://10.0.0.1:8080', leader: true, buildsRunning: 1, ...beat });
    const now = new Date();
    const listed = await registry.list(now);
    assert.deepEqual(
      listed.map((i) => ({ id: i.id, url: i.url, state: i.state, leader: i.leader, builds_running: i.builds_running, version: i.version })),
      [
        { id: 'a', url: 'http://10.0.0.1:8080', state: 'live', leader: true, builds_running: 1, version: '1.2.3' },
        { id: 'b', url: null, state: 'live', leader: false, builds_running: 0, version: '1.2.3' },
      ],
    );
    assert.deepEqual(Object.keys(listed[0] ?? {}).sort(), ['builds_running', 'id', 'last_seen_at', 'leader', 'started_at', 'state', 'url', 'version']);
    assert.deepEqual([...(await registry.liveUrls(now))], [['a', 'http://10.0.0.1:8080']]);

    // Leadership moves: the new leader's beat clears the flag the old one left.
    await registry.heartbeat({ id: 'b', url: null, leader: true, buildsRunning: 0, ...beat });
    assert.deepEqual((await registry.list(now)).map((i) => [i.id, i.leader]), [['a', false], ['b', true]]);

    // 31 s later without a heartbeat: lost, and no longer the leader.
    const later = new Date(now.getTime() + 31_000);
    const lost = await registry.list(later);
    assert.deepEqual(lost.map((i) => [i.id, i.state, i.leader, i.builds_running]), [['a', 'lost', false, 0], ['b', 'lost', false, 0]]);
    assert.equal((await registry.liveUrls(later)).size, 0);

    // A day and a bit later: not listed, and pruned.
    const dayLater = new Date(now.getTime() + 24 * 3600_000 + 60_000);
    assert.deepEqual(await registry.list(dayLater), []);
    assert.equal(await registry.prune(dayLater), 2);
    assert.equal(await registry.prune(dayLater), 0);
  });
});
