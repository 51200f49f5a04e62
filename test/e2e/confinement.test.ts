// End to end on the real engine: deployed apps run confined (capabilities, privileges, pids, logs,
// init, network isolation between deployments), and app logs still read through the API.
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { DockerEngine, createDockerClient } from '../../src/runtime/docker/docker-engine.js';
import { pruneAppFirewalls } from '../../src/runtime/docker/build-sandbox.js';
import { APP_CAPABILITIES, appNetworkName } from '../../src/runtime/engine.js';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { execIn } from '../helpers/engine-exec.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const docker = createDockerClient();

/** The rules of an iptables chain, as `iptables -S` prints them. */
async function iptablesRules(chain: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)('iptables', ['-w', '5', '-S', chain]);
  return stdout.split('\n').map((line) => line.trim());
}

describe('app containers are confined', () => {
  let ts: TestServer;
  let alice: string;
  let bob: string;

  before(async () => {
    ts = await startTestServer({ SLIPWAY_APP_PIDS_LIMIT: '200' });
    alice = (await ts.newUser('alice')).token;
    bob = (await ts.newUser('bob')).token;
  });
  after(async () => {
    await ts.close();
  });

  /** Deploys a busybox app for `token`; resolves with its id, subdomain and live container id. */
  async function deployed(token: string, body: string, extra: Record<string, unknown> = {}): Promise<{ id: string; subdomain: string; container: string }> {
    const { archive } = await busyboxArchive({ body });
    const app = await createArchiveApp(ts, token, archive, extra);
    const build = await deployAndWait(ts, token, app.id);
    assert.equal(build.status, 200, build.text);
    const containers = await docker.listContainers({ filters: { label: [`dev.slipway.deployment=${app.id}`] } });
    assert.equal(containers.length, 1);
    return { ...app, container: containers[0]!.Id };
  }

  test("a deployed app's container: capabilities, no-new-privileges, pids, rotated logs, init, limits, network", async () => {
    const app = await deployed(alice, 'confined app\n', { memory_mb: 96, cpus: 0.5 });
    assert.equal((await appRequest(ts.port, app.subdomain)).body, 'confined app\n');
    const raw = await docker.getContainer(app.container).inspect();
    const host = raw.HostConfig;
    assert.deepEqual(host.CapDrop, ['ALL']);
    assert.deepEqual([...(host.CapAdd ?? [])].sort(), [...APP_CAPABILITIES].sort());
    assert.deepEqual(host.SecurityOpt, ['no-new-privileges']);
    assert.equal(host.PidsLimit, 200);
    assert.deepEqual(host.LogConfig, { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } });
    assert.equal(host.Init, true);
    assert.equal(host.Memory, 96 * 1024 * 1024);
    assert.equal(host.NanoCpus, 500_000_000);
    const network = appNetworkName(ts.server.instanceId);
    assert.equal(host.NetworkMode, network);
    assert.deepEqual(Object.keys(raw.NetworkSettings.Networks), [network]);
    for (const bindings of Object.values(raw.NetworkSettings.Ports ?? {})) {
      for (const binding of bindings ?? []) assert.equal(binding.HostIp, '127.0.0.1');
    }
    const net = await docker.getNetwork(network).inspect();
    assert.equal(net.Options?.['com.docker.network.bridge.enable_icc'], 'false');
    assert.equal(net.Labels?.['dev.slipway.instance'], ts.server.instanceId);

    // The app's output still reads through the API with json-file rotation.
    const logs = await ts.request('GET', `/api/v1/deployments/${app.id}/logs?tail=50`, { token: alice });
    assert.equal(logs.status, 200, logs.text);
    assert.match(logs.text, /listening on 8080/);
  });

  test("one tenant's container cannot reach another's by its bridge address", async () => {
    const a = await deployed(alice, 'tenant a\n');
    const b = await deployed(bob, 'tenant b\n');
    assert.equal((await appRequest(ts.port, b.subdomain)).body, 'tenant b\n', "b serves through the router");
    const network = appNetworkName(ts.server.instanceId);
    const address = (await docker.getContainer(b.container).inspect()).NetworkSettings.Networks[network]?.IPAddress;
    assert.ok(address !== undefined && address !== '');
    // The container dials; the test only reads its output through the engine.
    const out = await execIn(docker, a.container, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${address} 8080; echo "exit=$?"`]);
    assert.doesNotMatch(out, /tenant b|HTTP\/1/);
    assert.match(out, /exit=1/);
    // b itself is up on that address: from inside b, its own server answers there.
    const self = await execIn(docker, b.container, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 127.0.0.1 8080`]);
    assert.match(self, /tenant b/);
  });

  test('an app opens no connection to the host (the edge and its replies still pass), and its network drops link-local', async () => {
    const app = await deployed(alice, 'walled in\n');
    assert.equal((await appRequest(ts.port, app.subdomain)).body, 'walled in\n', 'the edge reaches the app and its replies pass');
    // A service on the host, on every interface (the test itself dials nothing but loopback).
    let hits = 0;
    const listener = net.createServer((socket) => {
      hits += 1;
      socket.on('error', () => undefined);
      socket.end('host secret\n');
    });
    await new Promise<void>((resolve) => listener.listen(0, '0.0.0.0', resolve));
    const port = (listener.address() as AddressInfo).port;
    const network = await docker.getNetwork(appNetworkName(ts.server.instanceId)).inspect();
    const ipam = network.IPAM?.Config?.[0];
    assert.ok(ipam?.Gateway !== undefined && ipam.Subnet !== undefined);
    const open = await docker.createNetwork({ Name: `slipway-test-open-${crypto.randomUUID()}`, Driver: 'bridge', Labels: { 'dev.slipway.test': 'true' } });
    try {
      // The container dials the host through the app network's gateway: nothing arrives.
      const walled = await execIn(docker, app.container, ['sh', '-c', `nc -w 3 ${ipam.Gateway} ${port} </dev/null; echo "exit=$?"`]);
      assert.doesNotMatch(walled, /host secret/);
      assert.equal(hits, 0);
      // Control: the same container, through a network without the rules, reaches the same service.
      await open.connect({ Container: app.container });
      const openGateway = (await open.inspect()).IPAM?.Config?.[0]?.Gateway;
      assert.ok(openGateway !== undefined);
      const reached = await execIn(docker, app.container, ['sh', '-c', `nc -w 3 ${openGateway} ${port} </dev/null`]);
      assert.match(reached, /host secret/);
      assert.equal(hits, 1);
    } finally {
      await open.disconnect({ Container: app.container, Force: true }).catch(() => undefined);
      await open.remove().catch(() => undefined);
      listener.close();
    }
    // Link-local (cloud metadata at 169.254.169.254): the network's forwarded traffic there is dropped.
    // The network's chains hang from SLIPWAY-APPS(-IN), entered by one rule for every br-* interface:
    // packets from elsewhere (loopback: the edge, tunnels) never walk one rule per app network.
    const bridge = network.Options?.['com.docker.network.bridge.name'] ?? `br-${network.Id.slice(0, 12)}`;
    assert.ok((await iptablesRules('DOCKER-USER')).includes('-A DOCKER-USER -i br-+ -j SLIPWAY-APPS'));
    const input = await iptablesRules('INPUT');
    assert.ok(input.includes('-A INPUT -i br-+ -j SLIPWAY-APPS-IN'));
    assert.deepEqual(input.filter((line) => / -j SLIPWAY-APP-/.test(line)), [], 'no per-network rule in INPUT');
    const dispatch = await iptablesRules('SLIPWAY-APPS');
    const jump = dispatch.find((line) => line.startsWith(`-A SLIPWAY-APPS -i ${bridge} -j SLIPWAY-APP-`));
    assert.ok(jump !== undefined, dispatch.join('\n'));
    const chain = jump.split(' -j ')[1] ?? '';
    assert.ok((await iptablesRules(chain)).includes(`-A ${chain} -d 169.254.0.0/16 -j DROP`));
  });

  test("a removed app network's firewall goes with it; rules of bridges gone meanwhile (or in the old place) are pruned", async () => {
    const engine = new DockerEngine(docker);
    const name = `slipway-test-fw-${crypto.randomUUID()}`;
    const { id } = await engine.ensureNetwork({ name, labels: { 'dev.slipway.test': 'true' }, isolated: true, confined: true });
    const bridge = `br-${id.slice(0, 12)}`;
    const dispatch = (): Promise<string[]> => iptablesRules('SLIPWAY-APPS-IN');
    const chainOf = async (of: string): Promise<string | undefined> =>
      (await dispatch()).find((line) => line.startsWith(`-A SLIPWAY-APPS-IN -i ${of} -j `))?.split(' -j ')[1];
    const chain = (await chainOf(bridge)) ?? '';
    assert.match(chain, /^SLIPWAY-APP-[0-9a-f]{10}-IN$/);
    await engine.removeNetwork(name);
    assert.equal(await chainOf(bridge), undefined, 'the jump is gone');
    await assert.rejects(iptablesRules(chain), 'the chain is gone');

    // What an older Slipway, or a network removed while none ran, left: a jump straight from INPUT
    // for a live bridge (moved into the dispatch chain) and one for a bridge that no longer exists.
    const live = await engine.ensureNetwork({ name: `${name}-live`, labels: { 'dev.slipway.test': 'true' }, isolated: true, confined: true });
    const liveBridge = `br-${live.id.slice(0, 12)}`;
    const liveChain = (await chainOf(liveBridge)) ?? '';
    assert.match(liveChain, /^SLIPWAY-APP-[0-9a-f]{10}-IN$/);
    const goneBridge = 'br-0000deadbeef';
    const goneChain = 'SLIPWAY-APP-0000000000-IN';
    const orphanChain = 'SLIPWAY-APP-0000000001';
    const run = (args: string[]) => promisify(execFile)('iptables', ['-w', '5', ...args]);
    try {
      await run(['-D', 'SLIPWAY-APPS-IN', '-i', liveBridge, '-j', liveChain]);
      await run(['-I', 'INPUT', '1', '-i', liveBridge, '-j', liveChain]);
      await run(['-N', goneChain]);
      await run(['-I', 'INPUT', '1', '-i', goneBridge, '-j', goneChain]);
      // A chain nothing jumps to any more, of no live bridge (an older Slipway removed only jumps).
      await run(['-N', orphanChain]);
      await pruneAppFirewalls();
      const input = await iptablesRules('INPUT');
      assert.deepEqual(input.filter((line) => / -j SLIPWAY-APP-/.test(line)), [], 'nothing per network is left in INPUT');
      assert.ok((await dispatch()).includes(`-A SLIPWAY-APPS-IN -i ${liveBridge} -j ${liveChain}`), 'the live bridge is still confined');
      await assert.rejects(iptablesRules(goneChain), "the gone bridge's chain is removed");
      await assert.rejects(iptablesRules(orphanChain), 'the orphan chain is removed');
      assert.ok((await iptablesRules(liveChain)).includes(`-A ${liveChain} -j DROP`), "the live bridge's chain is kept whole");
    } finally {
      await engine.removeNetwork(`${name}-live`);
      await run(['-D', 'INPUT', '-i', goneBridge, '-j', goneChain]).catch(() => undefined);
      await run(['-X', goneChain]).catch(() => undefined);
      await run(['-X', orphanChain]).catch(() => undefined);
    }
  });

  test('the loopback ADD attack: the build fails with a clear message and the listener is never reached', async () => {
    let hits = 0;
    const listener = http.createServer((_req, res) => res.end('server secret\n'));
    listener.on('connection', () => (hits += 1));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const port = (listener.address() as AddressInfo).port;
    try {
      const { archive } = await busyboxArchive({ body: 'attacker\n' });
      const app = await createArchiveApp(ts, alice, archive);
      for (const dockerfile of [
        `FROM ${BUSYBOX_IMAGE}\nADD http://127.0.0.1:${port}/secret /www/index.html\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
        `FROM 127.0.0.1:${port}/x\n`,
      ]) {
        const uploaded = await upload(ts, alice, app.id, archive, dockerfile);
        assert.equal(uploaded.status, 200, uploaded.text);
        const res = await deployAndWait(ts, alice, app.id);
        assert.equal(res.status, 500, res.text);
        assert.equal(res.json.error, 'build_failed');
        assert.match(res.json.message as string, /refused: line \d+: (ADD|FROM) .* refused/);
        const builds = await ts.request('GET', `/api/v1/deployments/${app.id}/builds`, { token: alice });
        const list = Array.isArray(builds.json) ? builds.json : (builds.json.items ?? builds.json.builds ?? builds.json.data);
        const latest = list[0];
        assert.equal(latest.status, 'failed');
        assert.match(latest.error as string, /refused/);
        const log = await ts.request('GET', `/api/v1/deployments/${app.id}/builds/${latest.id as string}/logs`, { token: alice });
        assert.match(log.text, /==> failed: image build failed: refused: line \d+: (ADD|FROM) /);
      }
      assert.equal(hits, 0, 'the engine never fetched from the host loopback');
    } finally {
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    }
  });
});
