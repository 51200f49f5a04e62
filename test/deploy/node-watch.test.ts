// Unit test of the nodes watcher: `node.down` once when a node seen up goes down; nothing for a node already down at the first look.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeWatchTask } from '../../src/deploy/node-watch.js';
import { AppEvents, type AppEvent } from '../../src/domain/app-events.js';
import type { NodeView } from '../../src/domain/nodes.js';

const node = (id: string, state: string): NodeView => ({ id, hostname: `host-${id}`, address: '10.0.0.1', role: 'worker', availability: 'active', state, replicas: 0 });

test('a node going down is told once; one down from the start and one coming back are not', async () => {
  let nodes: NodeView[] = [node('a', 'ready'), node('b', 'down')];
  const events = new AppEvents();
  const told: AppEvent[] = [];
  events.onAny((e) => told.push(e));
  const task = nodeWatchTask({ list: async () => nodes }, events, 1_000);
  const look = async (): Promise<void> => void (await task.run(new AbortController().signal));
  await look();
  assert.equal(told.length, 0, 'the first look only learns the states');
  nodes = [node('a', 'down'), node('b', 'ready')];
  await look();
  assert.deepEqual(told, [{ type: 'node.down', nodeId: 'a', hostname: 'host-a' }]);
  await look();
  assert.equal(told.length, 1, 'still down: not told again');
  nodes = [node('a', 'ready'), node('b', 'down')];
  await look();
  assert.deepEqual(told.map((e) => (e.type === 'node.down' ? e.nodeId : '')), ['a', 'b']);
  assert.equal(task.scope, 'leaderOnly');
});
