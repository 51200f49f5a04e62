// Unit tests: a swarm service's task figures are read on the engine of each task's node (fake node engines), and a node that cannot answer leaves only its own replicas out.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ContainerStats } from '../../src/runtime/engine.js';
import { configuredNodeEngines, NodeWarnings, readReplicaStats, type NodeEngines, type StatsReader } from '../../src/runtime/swarm/replica-stats.js';
import type { SwarmNode, SwarmTask } from '../../src/runtime/swarm/swarm-service.js';

const figures = (memoryBytes: number): ContainerStats => ({
  cpuPercent: 1,
  memoryBytes,
  memoryLimitBytes: 1000,
  networkRxBytes: 10,
  networkTxBytes: 20,
  restarts: 0,
  startedAt: '2026-11-27T10:00:00.000Z',
});

/** A fake node engine: the figures of the containers it runs; `hang`: never answers until aborted. */
function fakeEngine(containers: Record<string, number>, hang = false): StatsReader & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    containerStats: async (id, signal) => {
      asked.push(id);
      if (hang) {
        // A real engine's pending socket keeps the process alive (the time limit's own timer does not).
        const alive = setInterval(() => undefined, 1000);
        await new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true })).finally(() => clearInterval(alive));
      }
      const memory = containers[id];
      return memory === undefined ? null : figures(memory);
    },
  };
}

const node = (id: string, hostname: string, addr: string): SwarmNode => ({ ID: id, Description: { Hostname: hostname }, Status: { State: 'ready', Addr: addr } });
const task = (slot: number, nodeId: string, container: string, state = 'running'): SwarmTask => ({
  ID: `task-${slot}-${container}`,
  NodeID: nodeId,
  Slot: slot,
  Status: { State: state, ContainerStatus: { ContainerID: container } },
});

const NODES = new Map([
  ['n-manager', node('n-manager', 'manager', '10.9.0.1')],
  ['n-one', node('n-one', 'worker-one', '10.9.0.2')],
  ['n-two', node('n-two', 'worker-two', '10.9.0.3')],
]);

describe('replica stats across nodes', () => {
  test("each task is read on its own node's engine, with its slot as replica number", async () => {
    const local = fakeEngine({ c1: 100 });
    const one = fakeEngine({ c2: 200 });
    const two = fakeEngine({ c3: 300 });
    const engines: NodeEngines = { engineOf: (n) => ({ 'n-one': one, 'n-two': two })[n.ID] };
    const warned: string[] = [];
    const tasks = [task(3, 'n-two', 'c3'), task(1, 'n-manager', 'c1'), task(2, 'n-one', 'c2'), task(4, 'n-one', 'gone', 'shutdown')];
    const stats = await readReplicaStats(tasks, NODES, { localNodeId: 'n-manager', local, nodeEngines: engines, warnings: new NodeWarnings((m) => warned.push(m)) });
    assert.deepEqual(stats.map((s) => [s.replica, s.memoryBytes]), [[1, 100], [2, 200], [3, 300]]);
    assert.deepEqual([local.asked, one.asked, two.asked], [['c1'], ['c2'], ['c3']]);
    assert.deepEqual(warned, []);
  });

  test('without node engines only the manager\'s replicas are read, silently (the setting is unset)', async () => {
    const local = fakeEngine({ c1: 100 });
    const warned: string[] = [];
    const stats = await readReplicaStats([task(1, 'n-manager', 'c1'), task(2, 'n-one', 'c2')], NODES, { localNodeId: 'n-manager', local, nodeEngines: undefined, warnings: new NodeWarnings((m) => warned.push(m)) });
    assert.deepEqual(stats.map((s) => s.replica), [1]);
    assert.deepEqual(warned, []);
  });

  test('a node with no engine configured, or whose engine does not answer in time, has no entry and is warned about once', async () => {
    const local = fakeEngine({ c1: 100 });
    const silent = fakeEngine({ c2: 200 }, true);
    const engines: NodeEngines = { engineOf: (n) => (n.ID === 'n-one' ? silent : undefined) };
    const warned: string[] = [];
    const warnings = new NodeWarnings((m) => warned.push(m));
    const tasks = [task(1, 'n-manager', 'c1'), task(2, 'n-one', 'c2'), task(3, 'n-two', 'c3')];
    const options = { localNodeId: 'n-manager', local, nodeEngines: engines, warnings, timeoutMs: 50 };
    for (let round = 0; round < 2; round++) {
      const stats = await readReplicaStats(tasks, NODES, options);
      assert.deepEqual(stats.map((s) => s.replica), [1]);
    }
    assert.equal(warned.length, 2, warned.join('\n'));
    assert.match(warned.find((m) => m.includes('worker-two')) ?? '', /worker-two \(10\.9\.0\.3\) has no engine in SLIPWAY_SWARM_NODE_ENGINES/);
    assert.match(warned.find((m) => m.includes('worker-one')) ?? '', /engine of node worker-one \(10\.9\.0\.2\) did not answer/);
  });

  test('a node whose engine fails is warned about again only after it has answered in between', async () => {
    let fail = true;
    const flaky: StatsReader = { containerStats: async () => (fail ? Promise.reject(new Error('connect ECONNREFUSED')) : figures(5)) };
    const warned: string[] = [];
    const options = { localNodeId: 'n-manager', local: fakeEngine({}), nodeEngines: { engineOf: () => flaky }, warnings: new NodeWarnings((m) => warned.push(m)) };
    const tasks = [task(2, 'n-one', 'c2')];
    assert.deepEqual(await readReplicaStats(tasks, NODES, options), []);
    assert.deepEqual(await readReplicaStats(tasks, NODES, options), []);
    fail = false;
    assert.deepEqual((await readReplicaStats(tasks, NODES, options)).map((s) => s.memoryBytes), [5]);
    fail = true;
    assert.deepEqual(await readReplicaStats(tasks, NODES, options), []);
    assert.equal(warned.length, 2);
    assert.match(warned[0] ?? '', /ECONNREFUSED/);
  });

  test('configured node engines are found by address, hostname or id, and each is opened once', () => {
    const opened: string[] = [];
    const engines = configuredNodeEngines(
      [
        { node: '10.9.0.2', url: 'unix:///run/one.sock' },
        { node: 'worker-two', url: 'tcp://10.9.0.3:2376' },
        { node: 'n-manager', url: 'unix:///run/manager.sock' },
      ],
      (url) => {
        opened.push(url);
        return fakeEngine({});
      },
    );
    const byAddress = engines.engineOf(NODES.get('n-one') ?? { ID: '' });
    assert.ok(byAddress !== undefined);
    assert.equal(engines.engineOf(NODES.get('n-one') ?? { ID: '' }), byAddress, 'the same reader again');
    assert.ok(engines.engineOf(NODES.get('n-two') ?? { ID: '' }) !== undefined);
    assert.ok(engines.engineOf(NODES.get('n-manager') ?? { ID: '' }) !== undefined);
    assert.equal(engines.engineOf(node('n-other', 'elsewhere', '10.9.0.9')), undefined);
    assert.deepEqual(opened, ['unix:///run/one.sock', 'tcp://10.9.0.3:2376', 'unix:///run/manager.sock']);
  });
});
