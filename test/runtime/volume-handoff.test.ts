// Unit tests of the single-writer hand-over of a named volume (src/runtime/docker/volume-handoff.ts), over a small fake engine.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HandedOver, VolumeHandoff } from '../../src/runtime/docker/volume-handoff.js';
import { LABEL_DEPLOYMENT, type ContainerEngine, type ContainerInfo } from '../../src/runtime/engine.js';

/** The engine calls the hand-over makes, over a list of containers; `calls` records them in order. */
function fakeEngine(containers: ContainerInfo[]): { engine: ContainerEngine; calls: string[] } {
  const calls: string[] = [];
  const engine = {
    listContainers: async (labels: Record<string, string>) =>
      containers.filter((c) => Object.entries(labels).every(([k, v]) => k !== LABEL_DEPLOYMENT || c.labels[k] === v)),
    stopContainer: async (id: string, seconds: number) => {
      calls.push(`stop ${id} ${seconds}`);
    },
    startContainer: async (id: string) => {
      calls.push(`start ${id}`);
      return containers.find((c) => c.id === id)!;
    },
  } as unknown as ContainerEngine;
  return { engine, calls };
}

const container = (id: string, deployment: string, volumes: string[], state = 'running'): ContainerInfo => ({
  id, name: `c-${id}`, running: state === 'running', exitCode: null, hostPort: null, upstream: null, labels: { [LABEL_DEPLOYMENT]: deployment }, state, volumes,
});

test("a hand-over stops only the deployment's running holders of the volume, not the new set's own, and gives them back", async () => {
  const { engine, calls } = fakeEngine([
    container('old-store', 'd1', ['vol-data']),
    container('old-web', 'd1', []),
    container('new-store', 'd1', ['vol-data']),
    container('exited-store', 'd1', ['vol-data'], 'exited'),
    container('other-app', 'd2', ['vol-data']),
    container('old-cache', 'd1', ['vol-cache']),
  ]);
  const ledger = new HandedOver();
  const handoff = new VolumeHandoff(engine, ledger);
  const said: string[] = [];
  await handoff.take({ instanceId: 'i', deploymentId: 'd1' }, ['vol-data'], new Set(['new-store']), (t) => said.push(t));
  assert.deepEqual(calls, ['stop old-store 10']);
  assert.equal(handoff.tookAny, true);
  assert.match(said.join(''), /stopping c-old-store: it holds the volume/);
  assert.equal(ledger.held('old-store'), true, 'not lost while held');
  assert.equal(ledger.stoppedBy('old-store', Date.now()), true, 'its exit is no crash');
  assert.equal(ledger.stoppedBy('old-web', Date.now()), false);

  await handoff.stopCleanly(['new-store']);
  await handoff.giveBack(() => undefined);
  assert.deepEqual(calls, ['stop old-store 10', 'stop new-store 10', 'start old-store']);
  assert.equal(ledger.held('old-store'), false, 'running again: a later stop is a real one');
  assert.equal(ledger.stoppedBy('old-store', Date.now()), true, 'the hand-over exit still is no crash');
});

test('no volume, no stop', async () => {
  const { engine, calls } = fakeEngine([container('old-store', 'd1', ['vol-data'])]);
  const handoff = new VolumeHandoff(engine, new HandedOver());
  await handoff.take({ instanceId: 'i', deploymentId: 'd1' }, [], new Set(), () => undefined);
  await handoff.giveBack(() => undefined);
  assert.deepEqual(calls, []);
  assert.equal(handoff.tookAny, false);
});
