// The node guard's pure parts: its service spec and hash, the node addresses it names, its image's content hash, and its rule loop run by busybox against a fake iptables.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { contentHash } from '../../src/runtime/swarm/guard-image.js';
import { GUARD_SCRIPT, LABEL_GUARD, LABEL_GUARD_SPEC, guardAddresses, guardPorts, guardServiceSpec, guardSpecHash } from '../../src/runtime/swarm/node-guard.js';
import { eventually } from '../helpers/apps.js';

const RULE = '-i docker_gwbridge -p tcp --dport 32768:60999 -m conntrack --ctstate NEW -j DROP';

/** A fake iptables (argv: `iptables <op> …`) keeping its rules in $FAKE_STATE, one `-N chain` or `-A chain …` line each, as `iptables -S` prints them. */
const FAKE_IPTABLES = `#!/bin/busybox sh
shift
S="$FAKE_STATE"
echo "$*" >> "$S.calls"
op="$1"; shift
case "$op" in
  -N) grep -qxF -- "-N $1" "$S" && exit 1; echo "-N $1" >> "$S" ;;
  -X) grep -qxF -- "-N $1" "$S" || exit 1; grep -vxF -- "-N $1" "$S" > "$S.t"; mv "$S.t" "$S" ;;
  -F) grep -v -- "^-A $1 " "$S" > "$S.t"; mv "$S.t" "$S" ;;
  -C) grep -qxF -- "-A $*" "$S" ;;
  -A|-I) echo "-A $*" >> "$S" ;;
  -D) grep -qxF -- "-A $*" "$S" || exit 1; awk -v r="-A $*" '!d && $0 == r { d = 1; next } { print }' "$S" > "$S.t"; mv "$S.t" "$S" ;;
  -S) cat "$S" ;;
  *) exit 3 ;;
esac
`;

describe('node guard', () => {
  let dir = '';
  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-guard-test-'));
    await fs.writeFile(path.join(dir, 'iptables'), FAKE_IPTABLES, { mode: 0o755 });
    await fs.writeFile(path.join(dir, 'range'), '32768\t60999\n');
  });
  after(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** Runs the guard's script against the fake with `env`; resolves with the child and the fake's state file. */
  const runGuard = async (name: string, env: Record<string, string>, initial: string[]): Promise<{ child: ReturnType<typeof spawn>; state: string; exited: Promise<number | null>; stderr: () => string }> => {
    const state = path.join(dir, name);
    await fs.writeFile(state, initial.map((line) => `${line}\n`).join(''));
    const child = spawn('/bin/busybox', ['sh', '-c', GUARD_SCRIPT], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GUARD_IPTABLES: path.join(dir, 'iptables'), GUARD_RANGE_FILE: path.join(dir, 'range'), FAKE_STATE: state, GUARD_EVERY: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.stdout?.resume();
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    return { child, state, exited, stderr: () => err };
  };
  const lines = async (file: string): Promise<string[]> => (await fs.readFile(file, 'utf8').catch(() => '')).split('\n').filter((l) => l !== '');

  /** The chain a guard drew (its `-N SLWG-<hex>` line), once it is there. */
  const chainOf = async (state: string, not?: string): Promise<string> =>
    eventually(async () => (await lines(state)).map((l) => /^-N (SLWG-[0-9a-f]{12})$/.exec(l)?.[1]).find((c) => c !== undefined && c !== not), 30_000, 'the guard\'s chain');

  test("the loop keeps one DROP per node towards the published ports, one for the node itself, jumps from DOCKER-USER and INPUT; another guard's chains go once its own are in; SIGTERM removes its own", async () => {
    const older = ['-N DOCKER-USER', '-A DOCKER-USER -j SLWG-0000aaaa', '-N SLWG-0000aaaa', '-A SLWG-0000aaaa -d 10.0.0.9 ' + RULE, '-N SLWG-0000aaaa-in', '-A INPUT -j SLWG-0000aaaa-in'];
    const guard = await runGuard('state-1', { GUARD_NODES: '10.0.0.1 10.0.0.2', GUARD_PORTS: '2375 5000' }, older);
    try {
      const chain = await chainOf(guard.state, 'SLWG-0000aaaa');
      // Three rounds at least: the later ones find every rule in place and add none.
      await eventually(async () => ((await lines(`${guard.state}.calls`)).filter((c) => c === `-C INPUT -j ${chain}-in`).length >= 3 ? true : undefined), 30_000, 'three rounds of checks');
      assert.deepEqual((await lines(guard.state)).sort(), [
        `-A DOCKER-USER -j ${chain}`,
        `-A INPUT -j ${chain}-in`,
        ...['32768:60999', '2375', '5000'].flatMap((port) => [
          `-A ${chain} -d 10.0.0.1 ${RULE.replace('32768:60999', port)}`,
          `-A ${chain} -d 10.0.0.2 ${RULE.replace('32768:60999', port)}`,
          `-A ${chain}-in ${RULE.replace('32768:60999', port)}`,
        ]),
        '-N DOCKER-USER',
        `-N ${chain}`,
        `-N ${chain}-in`,
      ].sort());
      // Its own were in before the other's went (no moment without a rule).
      const calls = await lines(`${guard.state}.calls`);
      assert.ok(calls.indexOf(`-I INPUT -j ${chain}-in`) < calls.indexOf('-D INPUT -j SLWG-0000aaaa-in'), calls.join('\n'));
    } finally {
      guard.child.kill('SIGTERM');
    }
    assert.equal(await guard.exited, 0, guard.stderr());
    assert.deepEqual(await lines(guard.state), ['-N DOCKER-USER']);
  });

  test('two guards on one node draw two chains (one stopping leaves the other\'s); without node addresses the forwarded rule names no destination; a rule dockerd dropped is put back', async () => {
    const guard = await runGuard('state-2', { GUARD_NODES: '' }, ['-N DOCKER-USER']);
    try {
      const chain = await chainOf(guard.state);
      await eventually(async () => ((await lines(guard.state)).includes(`-A ${chain} ${RULE}`) ? true : undefined), 30_000, 'the rule');
      // Flushed behind its back (as a dockerd restart may do to its chains): the next round restores it.
      await fs.writeFile(guard.state, `-N DOCKER-USER\n-N ${chain}\n-N ${chain}-in\n`);
      await eventually(async () => {
        const now = await lines(guard.state);
        return now.includes(`-A ${chain} ${RULE}`) && now.includes(`-A DOCKER-USER -j ${chain}`) && now.includes(`-A INPUT -j ${chain}-in`) ? true : undefined;
      }, 30_000, 'the rules put back');
    } finally {
      guard.child.kill('SIGTERM');
    }
    assert.equal(await guard.exited, 0, guard.stderr());
  });

  test('a value that is not what it should be ends the task before any rule is touched', async () => {
    for (const [name, env] of [
      ['bad-node', { GUARD_NODES: '10.0.0.1 $(true)' }],
      ['bad-every', { GUARD_NODES: '', GUARD_EVERY: '1s' }],
      ['bad-port', { GUARD_NODES: '', GUARD_PORTS: '5000 -j' }],
    ] as const) {
      const guard = await runGuard(name, env, ['-N DOCKER-USER']);
      assert.equal(await guard.exited, 2, name);
      assert.match(guard.stderr(), /slipway-guard: /);
      assert.deepEqual(await lines(`${guard.state}.calls`), [], name);
    }
    await fs.writeFile(path.join(dir, 'range'), 'x y\n');
    try {
      const guard = await runGuard('bad-range', { GUARD_NODES: '' }, ['-N DOCKER-USER']);
      assert.equal(await guard.exited, 2);
      assert.match(guard.stderr(), /bad port range/);
    } finally {
      await fs.writeFile(path.join(dir, 'range'), '32768\t60999\n');
    }
  });

  test('the spec: one task per node in the host network with NET_ADMIN and NET_RAW only, labelled as the guard (never as an app), hashed over everything in it', () => {
    const spec = guardServiceSpec({ image: 'reg:5000/slipway-guard:0123', nodes: ['10.0.0.2', '10.0.0.1'], ports: [5000, 2375] });
    assert.deepEqual(spec.Mode, { Global: {} });
    assert.deepEqual(spec.TaskTemplate?.['Networks'], [{ Target: 'host' }]);
    const container = spec.TaskTemplate?.ContainerSpec ?? {};
    assert.deepEqual(container['CapabilityDrop'], ['ALL']);
    assert.deepEqual(container['CapabilityAdd'], ['CAP_NET_ADMIN', 'CAP_NET_RAW']);
    assert.deepEqual(container['Command'], ['/bin/busybox', 'sh', '-c', GUARD_SCRIPT]);
    const env = container['Env'] as string[];
    assert.ok(env.includes('GUARD_NODES=10.0.0.1 10.0.0.2'), env.join(' '));
    assert.equal(spec.Labels?.[LABEL_GUARD], 'true');
    assert.equal(container.Labels?.[LABEL_GUARD], 'true');
    for (const labels of [spec.Labels ?? {}, container.Labels ?? {}]) {
      assert.equal(labels['dev.slipway.managed'], undefined);
      assert.equal(labels['dev.slipway.instance'], undefined);
    }
    assert.equal(spec.Labels?.[LABEL_GUARD_SPEC], guardSpecHash(spec));
    // The same inputs, in any order: the same spec; another node or image: another hash.
    assert.deepEqual(guardServiceSpec({ image: 'reg:5000/slipway-guard:0123', nodes: ['10.0.0.1', '10.0.0.2'], ports: [5000, 2375] }), spec);
    const more = guardServiceSpec({ image: 'reg:5000/slipway-guard:0123', nodes: ['10.0.0.1', '10.0.0.2', '10.0.0.3'], ports: [5000, 2375] });
    assert.notEqual(more.Labels?.[LABEL_GUARD_SPEC], spec.Labels?.[LABEL_GUARD_SPEC]);
    const image = guardServiceSpec({ image: 'reg:5000/slipway-guard:4567', nodes: ['10.0.0.1', '10.0.0.2'], ports: [5000, 2375] });
    assert.notEqual(image.Labels?.[LABEL_GUARD_SPEC], spec.Labels?.[LABEL_GUARD_SPEC]);
    assert.throws(() => guardServiceSpec({ image: 'i', nodes: ['10.0.0.1 -j ACCEPT'], ports: [] }), /not an IPv4 address/);
    assert.throws(() => guardServiceSpec({ image: 'i', nodes: [], ports: [70000] }), /not a port/);
    assert.ok(env.includes('GUARD_PORTS=2375 5000'), env.join(' '));
  });

  test('node addresses: IPv4 only, each once, sorted; ports: the engine API and the registry\'s own when named (never a privileged one)', () => {
    assert.deepEqual(guardAddresses(['10.0.0.3', '', 'fd00::1', '10.0.0.1', '10.0.0.3', 'node-1']), ['10.0.0.1', '10.0.0.3']);
    assert.deepEqual(guardPorts('10.0.0.1:5000'), [2375, 2376, 5000]);
    assert.deepEqual(guardPorts('registry.example.com:5443/apps'), [2375, 2376, 5443]);
    assert.deepEqual(guardPorts('registry.example.com'), [2375, 2376]);
    assert.deepEqual(guardPorts('registry.example.com:443'), [2375, 2376]);
  });

  test("the image's content hash follows each file's bytes and place", async () => {
    const a = path.join(dir, 'a');
    await fs.writeFile(a, 'one');
    const first = await contentHash([{ source: a, target: '/bin/a' }]);
    assert.match(first, /^[0-9a-f]{16}$/);
    assert.equal(await contentHash([{ source: a, target: '/bin/a' }]), first);
    assert.notEqual(await contentHash([{ source: a, target: '/bin/b' }]), first);
    await fs.writeFile(a, 'two');
    assert.notEqual(await contentHash([{ source: a, target: '/bin/a' }]), first);
  });
});
