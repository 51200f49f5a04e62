// Health-checked replicas (decisions §16): a replica that stops answering leaves the route the data plane serves, and comes back when it answers; on a fake plane and on both real planes.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Upstream } from '../../src/core/upstream.js';
import { nodeDataPlane } from '../../src/proxy/node-data-plane.js';
import { healthCheckedPlane, tcpProbe, type UpstreamProbe } from '../../src/proxy/replica-health.js';
import type { Route } from '../../src/proxy/routing-table.js';
import { eventually } from '../helpers/apps.js';
import { FakeDataPlane } from '../helpers/fake-data-plane.js';
import { PLANES, startPlane, type PlaneUnderTest } from '../helpers/planes.js';

const A = { host: '10.0.0.1', port: 1001 };
const B = { host: '10.0.0.2', port: 1002 };
const C = { host: '10.0.0.3', port: 1003 };
const live = (...upstreams: Upstream[]): Route => ({ kind: 'app', deploymentId: 'dep_1', state: 'live', upstreams });
const servedUpstreams = (plane: FakeDataPlane, subdomain: string): string[] => {
  const route = plane.route(subdomain);
  return route?.kind === 'app' && route.state === 'live' ? route.upstreams.map((u) => u.host) : [];
};

/** A probe that answers from a set of unreachable hosts (addresses never dialled), counting checks per host. */
function fakeProbe(): { probe: UpstreamProbe; unreachable: Set<string>; checks: Map<string, number> } {
  const unreachable = new Set<string>();
  const checks = new Map<string, number>();
  return {
    unreachable,
    checks,
    probe: async (u) => {
      checks.set(u.host, (checks.get(u.host) ?? 0) + 1);
      return !unreachable.has(u.host);
    },
  };
}

describe('replica health, over a fake plane', () => {
  it('leaves out a replica after two failed checks in a row and takes it back after one success', async () => {
    const inner = new FakeDataPlane();
    const { probe, unreachable } = fakeProbe();
    const plane = healthCheckedPlane(inner, { probe, intervalMs: 3_600_000 });
    try {
      const route = live(A, B, C);
      plane.publish('shop', route);
      assert.deepEqual(servedUpstreams(inner, 'shop'), ['10.0.0.1', '10.0.0.2', '10.0.0.3']);
      unreachable.add(B.host);
      await plane.checkNow();
      assert.deepEqual(servedUpstreams(inner, 'shop'), ['10.0.0.1', '10.0.0.2', '10.0.0.3'], 'one failed check is not enough');
      await plane.checkNow();
      assert.deepEqual(servedUpstreams(inner, 'shop'), ['10.0.0.1', '10.0.0.3']);
      // The control plane still sees the route it published, every replica in it.
      assert.equal(plane.route('shop'), route);
      // A republish of the same replicas keeps the lost one out.
      plane.publish('shop', live(A, B, C));
      assert.deepEqual(servedUpstreams(inner, 'shop'), ['10.0.0.1', '10.0.0.3']);
      unreachable.delete(B.host);
      await plane.checkNow();
      assert.deepEqual(servedUpstreams(inner, 'shop'), ['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    } finally {
      plane.close();
    }
  });

  it('keeps every replica when all fail, and never checks a route with one replica or one not live', async () => {
    const inner = new FakeDataPlane();
    const { probe, unreachable, checks } = fakeProbe();
    const plane = healthCheckedPlane(inner, { probe, intervalMs: 3_600_000 });
    try {
      plane.publish('both', live(A, B));
      plane.publish('single', live(C));
      plane.publish('off', { kind: 'app', deploymentId: 'dep_2', state: 'stopped' });
      unreachable.add(A.host).add(B.host).add(C.host);
      await plane.checkNow();
      await plane.checkNow();
      assert.deepEqual(servedUpstreams(inner, 'both'), ['10.0.0.1', '10.0.0.2']);
      assert.deepEqual(servedUpstreams(inner, 'single'), ['10.0.0.3']);
      assert.equal(checks.get(C.host), undefined);
      assert.equal(checks.get(A.host), 2);
      // One comes back: only it serves.
      unreachable.delete(A.host);
      await plane.checkNow();
      assert.deepEqual(servedUpstreams(inner, 'both'), ['10.0.0.1']);
    } finally {
      plane.close();
    }
  });

  it('withdraws by the route as published or as served, and not by a stale one', async () => {
    const inner = new FakeDataPlane();
    const { probe, unreachable } = fakeProbe();
    const plane = healthCheckedPlane(inner, { probe, intervalMs: 3_600_000 });
    try {
      const published = live(A, B);
      plane.publish('shop', published);
      unreachable.add(A.host);
      await plane.checkNow();
      await plane.checkNow();
      const served = inner.route('shop');
      assert.notEqual(served, published);
      plane.withdraw('shop', live(A, B)); // an equal route, but not the one published
      assert.equal(plane.route('shop'), published);
      plane.withdraw('shop', served);
      assert.equal(plane.route('shop'), undefined);
      assert.equal(inner.route('shop'), undefined);
      plane.publish('shop', published);
      plane.withdraw('shop', published);
      assert.equal(inner.route('shop'), undefined);
      assert.deepEqual([...plane.routes()], []);
    } finally {
      plane.close();
    }
  });
});

describe('tcpProbe', () => {
  it('is true for a listening port and false once it is closed', async () => {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const upstream = { host: '127.0.0.1', port: (server.address() as AddressInfo).port };
    assert.equal(await tcpProbe(upstream, AbortSignal.timeout(5000)), true);
    server.close();
    await once(server, 'close');
    assert.equal(await tcpProbe(upstream, AbortSignal.timeout(5000)), false);
  });
});

/** An HTTP server on loopback answering its name. */
async function namedServer(name: string, port = 0): Promise<Server> {
  const server = createServer((_req, res) => res.end(name));
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

function get(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', (err) => resolve({ status: 0, body: String(err) }));
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.end();
  });
}

for (const kind of PLANES) {
  describe(`replica health on the ${kind} plane`, () => {
    let under: PlaneUnderTest;
    before(async () => {
      under = await startPlane(kind, 'apps.test');
    });
    after(async () => {
      await under.close();
    });

    it('a replica that stops listening stops getting requests, and gets them again once it is back', async () => {
      const one = await namedServer('one');
      let two = await namedServer('two');
      const twoPort = (two.address() as AddressInfo).port;
      const plane = healthCheckedPlane(nodeDataPlane(under.table, under), { intervalMs: 200, timeoutMs: 1000 });
      try {
        plane.publish('pair', live({ host: '127.0.0.1', port: (one.address() as AddressInfo).port }, { host: '127.0.0.1', port: twoPort }));
        await eventually(async () => {
          const bodies = new Set<string>();
          for (let i = 0; i < 6; i++) bodies.add((await get(under.port, 'pair.apps.test')).body);
          return bodies.has('one') && bodies.has('two') ? true : undefined;
        }, 30_000, 'both replicas to answer');
        two.closeAllConnections();
        two.close();
        await once(two, 'close');
        // Once the edge has left it out, every request is answered by the other replica.
        await eventually(async () => {
          const route = under.table.get('pair');
          return route?.kind === 'app' && route.state === 'live' && route.upstreams.length === 1 ? true : undefined;
        }, 30_000, 'the closed replica to leave the served route');
        // The route change reaches HAProxy through its runtime API a moment after the table changes.
        await under.haproxy?.drain({ host: '0.0.0.0', port: 1 }, 1000);
        for (let i = 0; i < 10; i++) assert.deepEqual(await get(under.port, 'pair.apps.test'), { status: 200, body: 'one' });
        two = await namedServer('two', twoPort);
        await eventually(async () => {
          const bodies = new Set<string>();
          for (let i = 0; i < 6; i++) bodies.add((await get(under.port, 'pair.apps.test')).body);
          return bodies.has('two') ? true : undefined;
        }, 30_000, 'the replica to be back');
      } finally {
        plane.close();
        plane.withdraw('pair');
        one.closeAllConnections();
        two.closeAllConnections();
        one.close();
        two.close();
      }
    });
  });
}
