// Tunnel routes on every edge, over fakes: a tunnel held elsewhere is forwarded to its holder, offline when the holder is lost or has no URL.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { memoryCoordination } from '../../src/deploy/memory-coordination.js';
import type { TunnelHolder } from '../../src/domain/tunnel-claims.js';
import { nodeDataPlane } from '../../src/proxy/node-data-plane.js';
import { RoutingTable, type Route, type StreamTarget } from '../../src/proxy/routing-table.js';
import { TUNNEL, syncRemoteTunnels } from '../../src/tunnel/remote-tunnel-sync.js';
import { eventually } from '../helpers/apps.js';

interface FakeTarget extends StreamTarget {
  readonly holder: string;
  readonly url: string;
}

function held(subdomain: string, tunnelId: string, runner: string): TunnelHolder {
  return { subdomain, tunnelId, runner, userId: 'u1', apiKeyId: 'k1', connectedAt: '2026-11-27T00:00:00.000Z' };
}

function setup(self = 'me', resyncMs = 60_000) {
  const coordination = memoryCoordination();
  const table = new RoutingTable('apps.test');
  const plane = nodeDataPlane(table, { drain: async () => undefined });
  const rows: TunnelHolder[] = [];
  const instances = new Map<string, string | null>();
  const locals = new Map<string, string>();
  const dropped: Array<[string, string]> = [];
  const logs: string[] = [];
  const keysClosed: string[] = [];
  const usersClosed: string[] = [];
  /** What the database says of this instance's tunnels' keys and users. */
  const revoked = { apiKeyIds: [] as string[], userIds: [] as string[] };
  const sync = syncRemoteTunnels({
    coordination,
    holders: async (subdomain) => rows.filter((r) => subdomain === undefined || r.subdomain === subdomain),
    liveInstances: async () => new Map(instances),
    dataPlane: plane,
    localTunnel: (subdomain) => locals.get(subdomain),
    dropLocal: (subdomain, tunnelId) => {
      dropped.push([subdomain, tunnelId]);
      locals.delete(subdomain);
      const route = table.get(subdomain);
      if (route?.kind === 'tunnel' && route.tunnelId === tunnelId) table.delete(subdomain, route);
    },
    closeForKey: (apiKeyId) => keysClosed.push(apiKeyId),
    closeForUser: (userId) => usersClosed.push(userId),
    revoked: async () => revoked,
    target: (holder, url): FakeTarget => ({ holder, url, handleRequest: () => undefined, handleUpgrade: () => undefined }),
    self,
    resyncMs,
    log: (_level, msg) => logs.push(msg),
  });
  /** Another instance announces a change of `subdomain`. */
  const announce = (origin: string, subdomain: string): void => coordination.announce(`${origin} ${TUNNEL}${subdomain}`);
  const routeOf = (subdomain: string): Route | undefined => table.get(subdomain);
  return { coordination, table, rows, instances, locals, dropped, logs, keysClosed, usersClosed, revoked, sync, announce, routeOf };
}

function targetOf(route: Route | undefined): FakeTarget | undefined {
  return route?.kind === 'tunnel' && route.state === 'connected' ? (route.target as FakeTarget) : undefined;
}

describe('tunnel routes across instances', () => {
  test('a tunnel held by another live instance is forwarded to its URL; withdrawn once released', async () => {
    const t = setup();
    t.instances.set('other', 'http://127.0.0.22:8080');
    t.rows.push(held('demo', 't1', 'other'));
    t.announce('other', 'demo');
    const target = await eventually(async () => targetOf(t.routeOf('demo')), 5000, 'the forwarding route');
    assert.deepEqual([target.holder, target.url], ['other', 'http://127.0.0.22:8080']);
    t.rows.length = 0;
    t.announce('other', 'demo');
    await eventually(async () => (t.routeOf('demo') === undefined ? true : undefined), 5000, 'the route withdrawn');
    t.sync.stop();
  });

  test('a holder without a URL, or lost, gives the offline tunnel route; the missing URL is logged once', async () => {
    const t = setup();
    t.instances.set('bare', null);
    t.rows.push(held('a', 't1', 'bare'), held('b', 't2', 'bare'), held('c', 't3', 'gone'));
    for (const name of ['a', 'b', 'c']) t.announce('bare', name);
    for (const name of ['a', 'b', 'c']) {
      const route = await eventually(async () => t.routeOf(name), 5000, `the route of ${name}`);
      assert.deepEqual(route, { kind: 'tunnel', tunnelId: route.kind === 'tunnel' ? route.tunnelId : '', state: 'disconnected' });
    }
    assert.equal(t.logs.filter((m) => /has no SLIPWAY_INSTANCE_URL/.test(m)).length, 1);
    // The lost one comes back (its heartbeat again): forwarded once more.
    t.instances.set('gone', 'http://127.0.0.23:8080');
    t.announce('gone', 'c');
    await eventually(async () => targetOf(t.routeOf('c')), 5000, 'the route forwarded again');
    t.sync.stop();
  });

  test('a tunnel held here is left to this instance; one whose client moved to another instance ends here', async () => {
    const t = setup('me');
    t.instances.set('me', 'http://127.0.0.21:8080');
    t.instances.set('other', 'http://127.0.0.22:8080');
    const localRoute: Route = { kind: 'tunnel', tunnelId: 'mine', state: 'disconnected' };
    t.table.set('demo', localRoute);
    t.locals.set('demo', 'mine');
    t.rows.push(held('demo', 'mine', 'me'));
    t.announce('other', 'demo');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(t.routeOf('demo'), localRoute);
    // The client reconnected to another instance: the claim moved there.
    t.rows[0] = held('demo', 'theirs', 'other');
    t.announce('other', 'demo');
    const target = await eventually(async () => targetOf(t.routeOf('demo')), 5000, 'the route to the new holder');
    assert.equal(target.holder, 'other');
    assert.deepEqual(t.dropped, [['demo', 'mine']]);
    t.sync.stop();
  });

  test('a read begun before this instance claimed a name does not overwrite its own tunnel', async () => {
    const t = setup('me');
    t.instances.set('other', 'http://127.0.0.22:8080');
    t.rows.push(held('demo', 'old', 'other'));
    t.announce('other', 'demo');
    await eventually(async () => targetOf(t.routeOf('demo')), 5000, 'the route to the holder');
    // This instance takes the name: its server publishes its own route and says so.
    const mine: Route = { kind: 'tunnel', tunnelId: 'new', state: 'disconnected' };
    t.rows[0] = held('demo', 'new', 'me');
    t.locals.set('demo', 'new');
    t.table.set('demo', mine);
    t.sync.changed('demo');
    t.announce('other', 'demo');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(t.routeOf('demo'), mine);
    assert.deepEqual(t.dropped, []);
    t.sync.stop();
  });

  test('an API key deleted on one instance closes its tunnels on the others (not twice on its own)', async () => {
    const here = setup('me');
    here.sync.keyDeleted('key-1');
    here.coordination.announce(`other ${'k:'}key-2`);
    await eventually(async () => (here.keysClosed.length > 0 ? true : undefined), 5000, 'the key announced by another instance');
    assert.deepEqual(here.keysClosed, ['key-2']);
    here.sync.stop();
  });

  test('a user disabled on one instance has their tunnels closed on the others (not twice on its own)', async () => {
    const here = setup('me');
    here.sync.userDisabled('user-1');
    here.coordination.announce(`other ${'u:'}user-2`);
    await eventually(async () => (here.usersClosed.length > 0 ? true : undefined), 5000, 'the user announced by another instance');
    assert.deepEqual(here.usersClosed, ['user-2']);
    assert.deepEqual(here.keysClosed, []);
    here.sync.stop();
  });

  test('a key deleted or a user disabled while the feed was down closes their tunnels here at the next resync', async () => {
    const here = setup('me', 100);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual([here.keysClosed, here.usersClosed], [[], []]);
    // No announcement reached this instance; the database has the change.
    here.revoked.apiKeyIds.push('key-9');
    here.revoked.userIds.push('user-9');
    // The periodic resync (and the one after the feed reconnects) reads everything again.
    await eventually(async () => (here.keysClosed.length > 0 && here.usersClosed.length > 0 ? true : undefined), 5000, 'the missed changes applied');
    // (Closed again at each resync until the tunnels are gone; closing a closed one is a no-op.)
    assert.deepEqual([[...new Set(here.keysClosed)], [...new Set(here.usersClosed)]], [['key-9'], ['user-9']]);
    here.sync.stop();
  });
});
