// The swarm test cluster itself (scripts/swarm-cluster.mjs): three engines in namespaces joined into one swarm, images through its registry, tasks reached directly on their nodes, nothing left after; and on it the swarm runtime's nodes (decisions §16).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import Dockerode from 'dockerode';
import { after, before, describe, test } from 'node:test';
import { LABEL_INSTANCE } from '../../src/runtime/engine.js';
import { swarmNodes } from '../../src/runtime/swarm/swarm-nodes.js';
import { eventually } from '../helpers/apps.js';
import { clusterScript, nodeDocker as docker, pushWhoImage, type ClusterLayout, type ClusterScript } from '../helpers/swarm-cluster.js';

const INSTANCE = `nodes-test-${process.pid}`;

/** GET http://address:port/path (a namespace address on the test bridge); the body, or undefined on any failure. */
function get(address: string, port: number, urlPath: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: address, port, path: urlPath, agent: false, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve(res.statusCode === 200 ? body : undefined));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

describe('swarm test cluster', () => {
  let cluster: ClusterScript;
  let layout: ClusterLayout | undefined;
  /** The who image, built and pushed once for every case that runs it. */
  let whoImage: Promise<string> | undefined;
  const image = (): Promise<string> => {
    assert.ok(layout !== undefined);
    whoImage ??= pushWhoImage(layout);
    return whoImage;
  };

  before(async () => {
    cluster = await clusterScript();
    layout = await cluster.up(process.pid);
  });
  after(async () => {
    if (layout !== undefined) await cluster.down(layout);
  });

  test('three ready nodes; an image pushed to its registry runs on every node as host-mode tasks the host reaches directly', async () => {
    assert.ok(layout !== undefined);
    const [manager] = layout.nodes;
    assert.ok(manager !== undefined);
    const nodes = docker(manager, ['node', 'ls', '--format', '{{.Status}} {{.Availability}}']).trim().split('\n');
    assert.deepEqual(nodes, ['Ready Active', 'Ready Active', 'Ready Active']);

    docker(manager, ['service', 'create', '-d', '--name', 'who', '--replicas', '3', '--replicas-max-per-node', '1', '--endpoint-mode', 'dnsrr', '--publish', 'mode=host,target=8080', await image()]);
    // Each task's node address and the port the node published for it (no routing mesh).
    const addressOf = new Map(
      docker(manager, ['node', 'ls', '-q']).trim().split('\n').map((id) => [id, docker(manager, ['node', 'inspect', id, '--format', '{{.Status.Addr}}']).trim()] as const),
    );
    const targets = await eventually(async () => {
      const tasks = docker(manager, ['service', 'ps', '-q', '--filter', 'desired-state=running', 'who']).trim().split('\n').filter((t) => t !== '');
      const found = tasks.flatMap((task) => {
        const [state, nodeId, port] = docker(manager, ['inspect', task, '--format', '{{.Status.State}} {{.NodeID}} {{with index .Status.PortStatus.Ports 0}}{{.PublishedPort}}{{end}}']).trim().split(' ');
        return state === 'running' && port !== undefined && port !== '' ? [{ address: addressOf.get(nodeId ?? '') ?? '', port: Number(port) }] : [];
      });
      return found.length === 3 ? found : undefined;
    }, 120_000, 'three running tasks');
    assert.deepEqual(new Set(targets.map((t) => t.address)), new Set(layout.nodes.map((n) => n.address)), 'one task per node');
    const hostnames = await eventually(async () => {
      const answers = await Promise.all(targets.map((t) => get(t.address, t.port, '/who.txt')));
      return answers.every((a) => a !== undefined) ? new Set(answers.map((a) => a?.trim())) : undefined;
    }, 60_000, 'every task to answer on its node');
    assert.equal(hostnames.size, 3);
    docker(manager, ['service', 'rm', 'who']);
  });

  // The swarm runtime's nodes (src/runtime/swarm/swarm-nodes.ts): GET /api/v1/nodes' fields with this installation's replicas per node, drain and activate.
  test("three nodes with their addresses and this installation's replicas; a drained node's replicas move away, activate brings it back", async () => {
    assert.ok(layout !== undefined);
    const [manager, worker] = layout.nodes;
    assert.ok(manager !== undefined && worker !== undefined);
    const who = await image();
    docker(manager, ['service', 'create', '-d', '--name', 'ours', '--label', `${LABEL_INSTANCE}=${INSTANCE}`, '--replicas', '3', '--replicas-max-per-node', '2', '--endpoint-mode', 'dnsrr', '--publish', 'mode=host,target=8080', who]);
    // Another installation's service is not counted.
    docker(manager, ['service', 'create', '-d', '--name', 'theirs', '--label', `${LABEL_INSTANCE}=someone-else`, '--replicas', '1', '--endpoint-mode', 'dnsrr', who]);
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
    docker(manager, ['service', 'rm', 'ours', 'theirs']);
  });

  test('down removes the namespaces, the bridge and the FORWARD rule; up again after a crash starts clean', async () => {
    assert.ok(layout !== undefined);
    const gone = layout;
    await cluster.down(gone);
    layout = undefined;
    assert.ok(!execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).includes(gone.nodes[0]?.netns ?? '?'));
    assert.throws(() => execFileSync('ip', ['link', 'show', gone.bridge], { stdio: 'ignore' }));
    assert.throws(() => execFileSync('iptables', ['-C', ...gone.forwardRule], { stdio: 'ignore' }));
  });
});
