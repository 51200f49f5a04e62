// Unit test of the edge-first drain (src/deploy/node-drain.ts) over fakes: the node leaves the routes and its requests end before the runtime drains it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { drainingNodes } from '../../src/deploy/node-drain.js';
import type { NodeDirectory, NodeView } from '../../src/domain/nodes.js';
import type { Route } from '../../src/proxy/routing-table.js';

const node = (id: string, address: string, availability: NodeView['availability'] = 'active'): NodeView => ({
  id,
  hostname: id,
  address,
  role: 'worker',
  availability,
  state: 'ready',
  replicas: 1,
});

describe('drainingNodes', () => {
  test("a drain takes the node's replicas out of the routes and waits for their requests before the runtime drains it", async () => {
    const steps: string[] = [];
    const nodes = [node('n1', '10.0.0.1'), node('n2', '10.0.0.2')];
    const inner: NodeDirectory = {
      list: async () => nodes,
      setAvailability: async (id, availability) => {
        steps.push(`runtime ${availability} ${id}`);
        return { ...node(id, '10.0.0.2'), availability };
      },
    };
    const routes = new Map<string, Route>([
      ['a', { kind: 'app', deploymentId: 'd1', state: 'live', upstreams: [{ host: '10.0.0.1', port: 1 }, { host: '10.0.0.2', port: 2 }] }],
      ['b', { kind: 'app', deploymentId: 'd2', state: 'stopped' }],
    ]);
    const drained = await drainingNodes(inner, {
      runtime: { leave: (id) => steps.push(`leave ${id}`), stay: (id) => steps.push(`stay ${id}`) },
      liveSubdomains: async () => ['a', 'b'],
      refreshRoutes: async () => {
        steps.push('refresh');
      },
      dataPlane: {
        route: (subdomain) => routes.get(subdomain),
        drain: async (upstream) => {
          steps.push(`drain ${upstream.host}:${upstream.port}`);
        },
      },
      drainMs: 1000,
    }).setAvailability('n2', 'drain');
    assert.equal(drained?.availability, 'drain');
    assert.deepEqual(steps, ['leave n2', 'refresh', 'drain 10.0.0.2:2', 'runtime drain n2', 'stay n2']);
  });

  test('activate, an unknown node and a node already drained go straight to the runtime; a failed drain releases the node', async () => {
    const steps: string[] = [];
    const inner: NodeDirectory = {
      list: async () => [node('n1', '10.0.0.1', 'drain'), node('n3', '10.0.0.3')],
      setAvailability: async (id, availability) => {
        steps.push(`runtime ${availability} ${id}`);
        if (id === 'n3') throw new Error('engine down');
        return id === 'none' ? undefined : node(id, '10.0.0.1', availability);
      },
    };
    const directory = drainingNodes(inner, {
      runtime: { leave: (id) => steps.push(`leave ${id}`), stay: (id) => steps.push(`stay ${id}`) },
      liveSubdomains: async () => [],
      refreshRoutes: async () => undefined,
      dataPlane: { route: () => undefined, drain: async () => undefined },
      drainMs: 1000,
    });
    assert.equal((await directory.setAvailability('n1', 'active'))?.availability, 'active');
    assert.equal(await directory.setAvailability('none', 'drain'), undefined);
    assert.equal((await directory.setAvailability('n1', 'drain'))?.availability, 'drain');
    await assert.rejects(directory.setAvailability('n3', 'drain'), /engine down/);
    assert.deepEqual(steps, ['runtime active n1', 'runtime drain none', 'runtime drain n1', 'leave n3', 'runtime drain n3', 'stay n3']);
  });
});
