// The swarm runtime's nodes (decisions §16) on the real test cluster: GET /api/v1/nodes' fields with this installation's replicas per node, drain and activate.
import assert from 'node:assert/strict';
import Dockerode from 'dockerode';
import { after, before, describe, test } from 'node:test';
import { LABEL_INSTANCE } from '../../src/runtime/engine.js';
import { swarmNodes } from '../../src/runtime/swarm/swarm-nodes.js';
import { eventually } from '../helpers/apps.js';
import { clusterScript, nodeDocker, pushWhoImage, type ClusterLayout, type ClusterScript } from '../helpers/swarm-cluster.js';

const INSTANCE = `nodes-test-${process.pid}`;

describe('swarm nodes', () => {
  let cluster: ClusterScript;
  let layout: ClusterLayout | undefined;

  before(async () => {
    cluster = await clusterScript();
    layout = await cluster.up(process.pid);
  });
  after(async () => {
    if (layout !== undefined) await cluster.down(layout);
  });

  test("three nodes with their addresses and this installation's replicas; a drained node's replicas move away, activate brings it back", async () => {
    assert.ok(layout !== undefined);
    const [manager, worker] = layout.nodes;
    assert.ok(manager !== undefined && worker !== undefined);
    const image = pushWhoImage(layout);
    nodeDocker(manager, ['service', 'create', '-d', '--name', 'ours', '--label', `${LABEL_INSTANCE}=${INSTANCE}`, '--replicas', '3', '--replicas-max-per-node', '2', '--endpoint-mode', 'dnsrr', '--publish', 'mode=host,target=8080', image]);
    // Another installation's service is not counted.
    nodeDocker(manager, ['service', 'create', '-d', '--name', 'theirs', '--label', `${LABEL_INSTANCE}=someone-else`, '--replicas', '1', '--endpoint-mode', 'dnsrr', image]);
    const nodes = swarmNodes(new Dockerode({ socketPath: manager.socket }), INSTANCE);

    const listed = await eventually(async () => {
      const list = await nodes.list();
      return list.reduce((sum, n) => sum + n.replicas, 0) === 3 ? list : undefined;
    }, 90_000, 'three running replicas');
    assert.equal(listed.length, 3);
    assert.deepEqual(new Set(listed.map((n) => n.address)), new Set(layout.nodes.map((n) => n.address)));
    assert.deepEqual(listed.map((n) => n.role).sort(), ['manager', 'worker', 'worker']);
    for (const node of listed) {
      assert.deepEqual(Object.keys(node).sort(), ['address', 'availability', 'hostname', 'id', 'replicas', 'role', 'state']);
      assert.equal(node.availability, 'active');
      assert.equal(node.state, 'ready');
    }

    const target = listed.find((n) => n.address === worker.address);
    assert.ok(target !== undefined);
    const drained = await nodes.setAvailability(target.id, 'drain');
    assert.equal(drained?.availability, 'drain');
    const after = await eventually(async () => {
      const list = await nodes.list();
      const moved = list.find((n) => n.id === target.id)?.replicas === 0 && list.reduce((sum, n) => sum + n.replicas, 0) === 3;
      return moved ? list : undefined;
    }, 90_000, "the drained node's replicas to run elsewhere");
    assert.equal(after.find((n) => n.id === target.id)?.availability, 'drain');

    assert.equal((await nodes.setAvailability(target.id, 'active'))?.availability, 'active');
    assert.equal(await nodes.setAvailability('nosuchnode', 'drain'), undefined);
    nodeDocker(manager, ['service', 'rm', 'ours', 'theirs']);
  });
});
