// Integration tests of build confinement on the real engine: refused fetches, links, limits, network.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { DockerEngine, createDockerClient } from '../../src/runtime/docker/docker-engine.js';
import { buildBridgeName } from '../../src/runtime/docker/build-sandbox.js';
import { EngineBuildError, LABEL_MANAGED, containerName } from '../../src/runtime/engine.js';
import type { BuildSandbox } from '../../src/runtime/engine.js';
import { execIn } from '../helpers/engine-exec.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';

const docker = createDockerClient();
const engine = new DockerEngine(docker);
const runId = randomUUID();
const LABEL_RUN = 'dev.slipway.test-run';
const runLabels = { [LABEL_MANAGED]: 'true', [LABEL_RUN]: runId };
const MB = 1024 * 1024;
const BUILD_NETWORK = `slipway-test-${runId}-build`;
const SANDBOX: BuildSandbox = {
  network: { mode: 'confined', name: BUILD_NETWORK, labels: runLabels },
  memoryBytes: 200 * MB,
  nanoCpus: 500_000_000,
  pidsLimit: 40,
};

let workDir = '';
let counter = 0;

async function contextDir(dockerfile?: string): Promise<string> {
  const dir = path.join(workDir, `ctx-${++counter}`);
  await mkdir(dir, { recursive: true });
  if (dockerfile !== undefined) await writeFile(path.join(dir, 'Dockerfile'), dockerfile);
  return dir;
}

/** Builds `dir`; resolves with the output, or with the EngineBuildError the build failed with. */
async function build(dir: string, sandbox: BuildSandbox = SANDBOX): Promise<{ output: string; error: EngineBuildError | null }> {
  let output = '';
  try {
    await engine.buildImage({
      contextDir: dir,
      dockerfile: 'Dockerfile',
      tag: `slipway-test/sandbox-${runId.slice(0, 8)}:${++counter}`,
      labels: runLabels,
      signal: AbortSignal.timeout(120_000),
      onOutput: (text) => (output += text),
      sandbox,
    });
    return { output, error: null };
  } catch (err) {
    if (err instanceof EngineBuildError) return { output, error: err };
    throw err;
  }
}

/** A listener (loopback unless told) that counts connections; the attacks below must never reach it. */
async function tripwire(host = '127.0.0.1'): Promise<{ port: number; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server = http.createServer((_req, res) => res.end('secret\n'));
  // Any connection counts, even one that never sends a request.
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    hits += 1;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    hits: () => hits,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('build confinement (real engine)', () => {
  before(async () => {
    workDir = await mkdtemp(path.join(os.tmpdir(), 'slipway-sandbox-test-'));
    await ensureBusyboxImage(engine);
  });
  after(async () => {
    for (const c of await engine.listContainers({ [LABEL_RUN]: runId })) await engine.removeContainer(c.id);
    // Children inherit the run's label: a parent goes only once its children have, so go in passes.
    for (let pass = 0; pass < 5; pass++) {
      const images = await engine.listImages({ [LABEL_RUN]: runId });
      if (images.length === 0) break;
      for (const i of images) await engine.removeImage(i.id).catch((err: unknown) => (pass < 4 && /child images/.test(String(err)) ? undefined : Promise.reject(err)));
    }
    for (const n of await engine.listNetworks({ [LABEL_RUN]: runId })) await engine.removeNetwork(n.id);
    if (workDir !== '') await rm(workDir, { recursive: true, force: true });
  });

  test('ADD http://127.0.0.1:<port>/secret is refused before the engine fetches anything', async () => {
    const wire = await tripwire();
    try {
      for (const add of [
        `ADD http://127.0.0.1:${wire.port}/secret /secret`,
        `ADD ["http://localhost:${wire.port}/secret", "/secret"]`,
        `ARG U=http://127.0.0.1:${wire.port}/secret\nADD \${U} /secret`,
        `add \\\n  http://127.0.0.1:${wire.port}/secret /secret`,
      ]) {
        const dir = await contextDir(`FROM ${BUSYBOX_IMAGE}\n${add}\n`);
        const { error } = await build(dir);
        assert.ok(error !== null, `${add}: the build failed`);
        assert.match(error.message, /refused: line \d+: ADD .* refused: ADD may not fetch URLs/);
        assert.match(error.outputTail, /ADD may not fetch URLs/);
      }
      assert.equal(wire.hits(), 0, 'the listener on the host loopback was never reached');
    } finally {
      await wire.close();
    }
  });

  test('FROM and COPY --from a loopback registry are refused; nothing is pulled', async () => {
    const wire = await tripwire();
    try {
      for (const text of [
        `FROM 127.0.0.1:${wire.port}/x\n`,
        `FROM localhost:${wire.port}/x:1\n`,
        `ARG REG=127.0.0.1:${wire.port}\nFROM \${REG}/x\n`,
        `FROM ${BUSYBOX_IMAGE}\nCOPY --from=127.0.0.1:${wire.port}/x /a /b\n`,
        `FROM [::1]:${wire.port}/x\n`,
      ]) {
        const { error } = await build(await contextDir(text));
        assert.ok(error !== null, text);
        assert.match(error.message, /refused: .*(loopback, private or reserved network|could not be resolved)/, text);
      }
      assert.equal(wire.hits(), 0);
    } finally {
      await wire.close();
    }
  });

  test("a base image's ONBUILD ADD of a loopback URL is refused; the listener is never reached", async () => {
    const wire = await tripwire();
    try {
      // The base is built straight through the engine API (Slipway would refuse its ONBUILD line).
      const base = `slipway-test/onbuild-${runId.slice(0, 8)}:1`;
      const baseDir = await contextDir(`FROM ${BUSYBOX_IMAGE}\nONBUILD ADD http://127.0.0.1:${wire.port}/secret /secret\n`);
      const stream = await docker.buildImage({ context: baseDir, src: ['Dockerfile'] }, { t: base, labels: runLabels, version: '1', rm: true });
      await new Promise<void>((resolve, reject) => docker.modem.followProgress(stream, (err: Error | null) => (err === null ? resolve() : reject(err))));
      assert.deepEqual((await docker.getImage(base).inspect()).Config.OnBuild, [`ADD http://127.0.0.1:${wire.port}/secret /secret`]);

      const { error } = await build(await contextDir(`FROM ${base}\nRUN true\n`));
      assert.ok(error !== null);
      assert.match(error.message, /refused: line 1: FROM .* refused: an ONBUILD trigger of that image: ADD .* refused: ADD may not fetch URLs/);
      assert.equal(wire.hits(), 0);
      // A base whose triggers are harmless builds (control).
      const harmless = `slipway-test/onbuild-${runId.slice(0, 8)}:2`;
      const harmlessDir = await contextDir(`FROM ${BUSYBOX_IMAGE}\nONBUILD RUN echo triggered\n`);
      const stream2 = await docker.buildImage({ context: harmlessDir, src: ['Dockerfile'] }, { t: harmless, labels: runLabels, version: '1', rm: true });
      await new Promise<void>((resolve, reject) => docker.modem.followProgress(stream2, (err: Error | null) => (err === null ? resolve() : reject(err))));
      const ok = await build(await contextDir(`FROM ${harmless}\n`));
      assert.equal(ok.error, null, ok.output);
      assert.match(ok.output, /triggered/);
    } finally {
      await wire.close();
    }
  });

  test('a symlinked .dockerignore or Dockerfile (or a Dockerfile under a linked folder) fails the build', async () => {
    const secret = path.join(workDir, `outside-${randomUUID()}`);
    await writeFile(secret, 'FROM scratch\n');
    const ignoreLink = await contextDir(`FROM ${BUSYBOX_IMAGE}\n`);
    await symlink(secret, path.join(ignoreLink, '.dockerignore'));
    const a = await build(ignoreLink);
    assert.match(a.error?.message ?? 'built', /\.dockerignore must be a regular file/);

    const fileLink = await contextDir();
    await symlink(secret, path.join(fileLink, 'Dockerfile'));
    const b = await build(fileLink);
    assert.match(b.error?.message ?? 'built', /"Dockerfile" is a symbolic link/);

    const dirLink = await contextDir();
    await mkdir(path.join(workDir, `outside-dir-${counter}`));
    await writeFile(path.join(workDir, `outside-dir-${counter}`, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\n`);
    await symlink(path.join(workDir, `outside-dir-${counter}`), path.join(dirLink, 'web'));
    let output = '';
    const c = await engine
      .buildImage({
        contextDir: dirLink,
        dockerfile: 'web/Dockerfile',
        tag: `slipway-test/sandbox-${runId.slice(0, 8)}:link`,
        labels: runLabels,
        signal: AbortSignal.timeout(60_000),
        onOutput: (t) => (output += t),
        sandbox: SANDBOX,
      })
      .then(() => null, (err: unknown) => err);
    assert.ok(c instanceof EngineBuildError);
    assert.match(c.message, /"web" is a symbolic link/);
    // A regular .dockerignore still works (control).
    const plain = await contextDir(`FROM ${BUSYBOX_IMAGE}\nCOPY . /ctx\nRUN ls /ctx\n`);
    await writeFile(path.join(plain, '.dockerignore'), 'hidden.txt\n');
    await writeFile(path.join(plain, 'hidden.txt'), 'x');
    await writeFile(path.join(plain, 'shown.txt'), 'x');
    const d = await build(plain);
    assert.equal(d.error, null, d.output);
    assert.match(d.output, /shown\.txt/);
    assert.doesNotMatch(d.output, /hidden\.txt/);
  });

  test('RUN steps run within the memory, CPU and pids limits', async () => {
    const script = [
      'echo "memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"',
      'echo "cpu=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max)"',
      // Spawns until fork fails; the inner shell dies there, the outer one reports.
      `sh -c 'i=0; while [ $i -lt 200 ]; do i=$((i+1)); sleep 60 & echo "spawned $i"; done'; echo "inner shell exited $?"`,
    ].join('; ');
    const dir = await contextDir(`FROM ${BUSYBOX_IMAGE}\nRUN ${JSON.stringify(['/bin/sh', '-c', script])}\n`);
    const { output, error } = await build(dir);
    assert.equal(error, null, output);
    assert.match(output, new RegExp(`memory=${200 * MB}\\b`));
    assert.match(output, /cpu=(50000|50000 100000)\b/);
    const spawned = Math.max(...[...output.matchAll(/spawned (\d+)/g)].map((m) => Number(m[1])));
    assert.ok(spawned > 5 && spawned < 40, `fork stopped at the pids limit (40), after ${spawned}`);
    assert.match(output, /can't fork|Resource temporarily unavailable/);
    assert.match(output, /inner shell exited [1-9]/);
  });

  test("RUN steps cannot reach the host through the build network's gateway; a container on another bridge can", async () => {
    // The network the build will use, made first so the test knows its gateway (the host's address on it).
    await engine.ensureNetwork({ name: BUILD_NETWORK, labels: runLabels, isolated: true, bridgeName: buildBridgeName(BUILD_NETWORK) });
    const gateway = (await docker.getNetwork(BUILD_NETWORK).inspect()).IPAM?.Config?.[0]?.Gateway;
    assert.ok(gateway !== undefined && gateway !== '');
    // This listener is on the host's address on that bridge (not reachable from outside this machine).
    const wire = await tripwire(gateway);
    try {
      const dir = await contextDir(
        `FROM ${BUSYBOX_IMAGE}\nRUN ${JSON.stringify(['/bin/sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${gateway} ${wire.port}; echo "nc exit $?"`])}\n`,
      );
      const { output, error } = await build(dir);
      assert.equal(error, null, output);
      assert.match(output, /nc exit 1/);
      assert.doesNotMatch(output, /secret/);
      assert.equal(wire.hits(), 0, 'the host listener was never reached from the build');

      // Control: from an app container on an ordinary network, the same address answers.
      const open = `slipway-test-${runId}-open`;
      await engine.ensureNetwork({ name: open, labels: runLabels, isolated: false });
      const app = await contextDir();
      await writeBusyboxApp(app, { body: 'x\n' });
      const tag = `slipway-test/sandbox-${runId.slice(0, 8)}:app`;
      await engine.buildImage({ contextDir: app, dockerfile: 'Dockerfile', tag, labels: runLabels, signal: AbortSignal.timeout(60_000), onOutput: () => {}, sandbox: SANDBOX });
      const info = await engine.runContainer({
        image: tag,
        name: containerName(runId, randomUUID()),
        labels: runLabels,
        env: { PORT: '8080' },
        containerPort: 8080,
        memoryBytes: 64 * MB,
        nanoCpus: 500_000_000,
        pidsLimit: 64,
        network: open,
      });
      const reached = await execIn(docker, info.id, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${gateway} ${wire.port}`]);
      assert.match(reached, /secret/);
      assert.ok(wire.hits() > 0);
      await engine.removeContainer(info.id);
    } finally {
      await wire.close();
    }
  });

  test('the firewall refuses build bridges\' traffic to private ranges and the host (an ICMP error, not a silent drop), DNS to the host resolvers excepted', async () => {
    await build(await contextDir(`FROM ${BUSYBOX_IMAGE}\n`)); // installs the rules
    const run = promisify(execFile);
    const forward = (await run('iptables', ['-w', '5', '-S', 'SLIPWAY-BUILD'])).stdout;
    for (const range of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10', '127.0.0.0/8']) {
      assert.match(forward, new RegExp(`-A SLIPWAY-BUILD -d ${range.replace(/\./g, '\\.')} -j REJECT --reject-with icmp-port-unreachable`));
    }
    assert.match((await run('iptables', ['-w', '5', '-S', 'SLIPWAY-BUILD-IN'])).stdout, /-A SLIPWAY-BUILD-IN -j REJECT --reject-with icmp-port-unreachable/);
    assert.match((await run('iptables', ['-w', '5', '-S', 'DOCKER-USER'])).stdout, /-A DOCKER-USER -i slpb\+ -j SLIPWAY-BUILD/);
    assert.match((await run('iptables', ['-w', '5', '-S', 'INPUT'])).stdout, /-A INPUT -i slpb\+ -j SLIPWAY-BUILD-IN/);
    const info = await docker.getNetwork(BUILD_NETWORK).inspect();
    assert.equal(info.Options?.['com.docker.network.bridge.name'], buildBridgeName(BUILD_NETWORK));
    assert.equal(info.Options?.['com.docker.network.bridge.enable_icc'], 'false');
  });

  test("with network 'none' a RUN step has no network at all", async () => {
    const dir = await contextDir(`FROM ${BUSYBOX_IMAGE}\nRUN ${JSON.stringify(['/bin/sh', '-c', 'ip -o addr | grep -v " lo " | grep -c inet; echo "routes=$(ip route | wc -l)"'])}\n`);
    const { output, error } = await build(dir, { ...SANDBOX, network: { mode: 'none' } });
    assert.equal(error, null, output);
    assert.match(output, /routes=0/);
  });
});
