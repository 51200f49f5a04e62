// The data-plane port's contract, run against the embedded Node data plane and the fake the lifecycle suite uses.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppProxy } from '../../src/proxy/app-proxy.js';
import type { DataPlane } from '../../src/proxy/data-plane.js';
import { nodeDataPlane } from '../../src/proxy/node-data-plane.js';
import { RoutingTable, type Route } from '../../src/proxy/routing-table.js';
import { FakeDataPlane } from '../helpers/fake-data-plane.js';

const implementations: Array<[string, () => { plane: DataPlane; close: () => void }]> = [
  [
    'node (routing table + app proxy)',
    () => {
      const table = new RoutingTable('example.test');
      const proxy = new AppProxy({ table, publicProtocol: 'http' });
      return { plane: nodeDataPlane(table, proxy), close: () => proxy.close() };
    },
  ],
  ['fake', () => ({ plane: new FakeDataPlane(), close: () => undefined })],
];

const live = (port: number): Route => ({ kind: 'app', deploymentId: 'd1', state: 'live', upstreams: [{ host: '127.0.0.1', port }] });

for (const [name, make] of implementations) {
  describe(`data plane contract: ${name}`, () => {
    test('publish replaces a route; route reads what is published; withdraw removes it', () => {
      const { plane, close } = make();
      assert.equal(plane.route('app'), undefined);
      plane.publish('app', { kind: 'app', deploymentId: 'd1', state: 'starting' });
      assert.equal(plane.route('app')?.state, 'starting');
      plane.publish('app', live(4000));
      assert.deepEqual(plane.route('app'), live(4000));
      plane.withdraw('app');
      assert.equal(plane.route('app'), undefined);
      close();
    });

    test('withdraw with an expected route leaves a newer owner alone', () => {
      const { plane, close } = make();
      const first: Route = { kind: 'tunnel', tunnelId: 't1', state: 'disconnected' };
      const second: Route = { kind: 'tunnel', tunnelId: 't2', state: 'disconnected' };
      plane.publish('name', first);
      plane.publish('name', second);
      plane.withdraw('name', first);
      assert.equal(plane.route('name'), second);
      plane.withdraw('name', second);
      assert.equal(plane.route('name'), undefined);
      close();
    });

    test('draining an upstream with nothing in flight resolves at once', async () => {
      const { plane, close } = make();
      plane.publish('app', live(4001));
      const started = Date.now();
      await plane.drain({ host: '127.0.0.1', port: 4001 }, 30_000);
      assert.ok(Date.now() - started < 10_000, 'did not wait for the timeout');
      close();
    });
  });
}
