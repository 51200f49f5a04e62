// The attack on an internal network (a compose set's, a database's) while the engine's own isolation lapses: the guard in the mangle table still refuses it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { DockerEngine, createDockerClient } from '../../src/runtime/docker/docker-engine.js';
import { INTERNAL_GUARD_CHAIN, internalGuardRules } from '../../src/runtime/docker/internal-guard.js';
import { ensureServiceNetwork, serviceNetworkName } from '../../src/runtime/service.js';
import { BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { execIn } from '../helpers/engine-exec.js';

const docker = createDockerClient();
const run = promisify(execFile);
const iptables = (args: string[]): Promise<{ stdout: string }> => run('iptables', ['-w', '5', ...args]);
const mangleRules = async (chain: string): Promise<string[]> => (await iptables(['-t', 'mangle', '-S', chain]).catch(() => ({ stdout: '' }))).stdout.split('\n').map((l) => l.trim());

/** What busybox nc prints when nothing answers (see compose-isolation.test.ts). */
const NO_ANSWER = /^(nc: timed out\n|nc: can't connect to remote host \([^)]+\): (Connection refused|No route to host|Network is unreachable)\n)?exit=1\n$/;

describe("an internal network's guard", () => {
  const engine = new DockerEngine(docker);
  const tag = crypto.randomBytes(4).toString('hex');
  const instanceId = `tg${tag}`;
  const labels = { 'dev.slipway.test': `internal-guard-${tag}` };
  const apps = `slipway-test-guard-${tag}-apps`;
  const internal = serviceNetworkName(instanceId, `set${tag}`);
  const containers: string[] = [];
  /** The host rules the attack adds (deleted in `after` whatever happens). */
  const added: string[][] = [];
  let bridge = '';
  let subnet = '';
  let vaultAddress = '';
  let attacker = '';

  const dial = (host: string): Promise<string> =>
    execIn(docker, attacker, ['sh', '-c', 'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 2 "$0" 80 2>&1; echo "exit=$?"', host]);
  const container = async (name: string, cmd: string[]): Promise<string> => {
    const created = await docker.createContainer({ Image: BUSYBOX_IMAGE, name: `slipway-test-guard-${tag}-${name}`, Cmd: cmd, Labels: labels, HostConfig: { NetworkMode: apps } });
    containers.push(created.id);
    await created.start();
    return created.id;
  };

  before(async () => {
    // As a release makes them: the apps network (every deployment's containers, no traffic between
    // them) and a set's internal network on a /26 of the pool, both confined.
    await engine.ensureNetwork({ name: apps, labels, isolated: true, confined: true });
    await ensureServiceNetwork(engine, instanceId, `set${tag}`, '10.213.0.0/16', labels);
    const info = await docker.getNetwork(internal).inspect();
    bridge = `br-${String(info.Id).slice(0, 12)}`;
    subnet = info.IPAM?.Config?.[0]?.Subnet ?? '';
    assert.match(subnet, /^10\.213\.\d+\.\d+\/26$/);
    // Alice's vault on both (like a compose companion), bob's container on the apps network only.
    const vault = await container('vault', ['sh', '-c', "mkdir -p /s && echo 'alice vault secret' > /s/index.html && exec httpd -f -p 80 -h /s"]);
    await docker.getNetwork(internal).connect({ Container: vault });
    vaultAddress = (await docker.getContainer(vault).inspect()).NetworkSettings.Networks[internal]!.IPAddress;
    attacker = await container('bob', ['sleep', '600']);
  });
  after(async () => {
    for (const rule of added) await iptables(['-D', ...rule]).catch(() => undefined);
    await Promise.all(containers.map((id) => docker.getContainer(id).remove({ force: true }).catch(() => undefined)));
    await engine.removeNetwork(internal).catch(() => undefined);
    await engine.removeNetwork(apps).catch(() => undefined);
  });

  test("with the engine's isolation stepped over (as while dockerd re-inserts its jump), the apps network still reaches nothing of an internal network; lifting the guard lets the same dial through; removing the network removes its rules", async () => {
    assert.ok((await mangleRules('FORWARD')).includes(`-A FORWARD -j ${INTERNAL_GUARD_CHAIN}`), 'mangle FORWARD enters the guard');
    for (const rule of internalGuardRules(bridge)) assert.ok((await mangleRules(INTERNAL_GUARD_CHAIN)).includes(`-A ${INTERNAL_GUARD_CHAIN} ${rule.join(' ')}`), `the bridge's rule ${rule.join(' ')}`);
    assert.match(await dial(vaultAddress), NO_ANSWER, 'the engine alone refuses it while its rules are in place');

    // What dockerd's delete-then-insert of FORWARD's isolation jump does for a moment, for this one
    // attacker and this one subnet only (nothing else on the host is opened): forwarded both ways
    // before any isolation (the vault answers through its internal network's gateway).
    const attackerAddress = (await docker.getContainer(attacker).inspect()).NetworkSettings.Networks[apps]!.IPAddress;
    for (const [from, to] of [[`${attackerAddress}/32`, subnet], [subnet, `${attackerAddress}/32`]] as const) {
      const bypass = ['DOCKER-USER', '-s', from, '-d', to, '-j', 'ACCEPT'];
      await iptables(['-I', 'DOCKER-USER', '1', ...bypass.slice(1)]);
      added.push(bypass);
    }
    assert.match(await dial(vaultAddress), NO_ANSWER, 'the guard refuses what the engine let through');

    // The control: the guard's rules of this bridge lifted, the same dial reaches the vault (the bypass is the hole).
    const lifted = internalGuardRules(bridge).map((rule) => [INTERNAL_GUARD_CHAIN, ...rule]);
    let reached = '';
    try {
      for (const rule of lifted) await iptables(['-t', 'mangle', '-D', ...rule]);
      // dockerd may shuffle FORWARD at this moment (another test creating a network): a few tries.
      for (let i = 0; i < 3 && !reached.includes('alice vault secret'); i++) reached = await dial(vaultAddress);
    } finally {
      for (const rule of lifted) await iptables(['-t', 'mangle', '-A', ...rule]);
    }
    assert.match(reached, /alice vault secret\nexit=0/);
    assert.match(await dial(vaultAddress), NO_ANSWER, 'refused again once the guard is back');

    // The network's removal takes its rules (the bridge's name is never reused, but the list stays short).
    await docker.getNetwork(internal).disconnect({ Container: containers[0]!, Force: true });
    await engine.removeNetwork(internal);
    const left = await mangleRules(INTERNAL_GUARD_CHAIN);
    assert.deepEqual(left.filter((l) => l.includes(bridge)), []);
  });
});
