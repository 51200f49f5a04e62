// Integration tests of the Docker engine layer against the real engine (loopback only).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DockerEngine, createDockerClient } from '../../src/runtime/docker/docker-engine.js';
import { dockerignoreMatcher } from '../../src/runtime/docker/build-context.js';
import {
  APP_CAPABILITIES,
  EngineBuildError,
  LABEL_BUILD,
  LABEL_DEPLOYMENT,
  LABEL_MANAGED,
  containerName,
} from '../../src/runtime/engine.js';
import type { BuildSandbox, ContainerEngine, RunContainerOptions } from '../../src/runtime/engine.js';
import { execIn as execInContainer } from '../helpers/engine-exec.js';
import { BUSYBOX_IMAGE, TEST_BUILD_SANDBOX, ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';

const docker = createDockerClient();
const engine: ContainerEngine = new DockerEngine(docker);
const runId = randomUUID();
/** Every image and container made here carries this, so `after` can remove them all. */
const LABEL_RUN = 'dev.slipway.test-run';
const runLabels = { [LABEL_MANAGED]: 'true', [LABEL_RUN]: runId };
const MB = 1024 * 1024;
/** The isolated network the run's containers join, and an open one for control experiments. */
const NETWORK = `slipway-test-${runId}-isolated`;
const OPEN_NETWORK = `slipway-test-${runId}-open`;
/** Builds here run confined, as Slipway's do: their own build network, memory, CPU and pids limits. */
const CONFINED: BuildSandbox = {
  network: { mode: 'confined', name: `slipway-test-${runId}-build`, labels: runLabels },
  memoryBytes: 256 * 1024 * 1024,
  nanoCpus: 1_000_000_000,
  pidsLimit: 64,
};


let workDir = '';
let counter = 0;
/** One busybox httpd app serving APP_BODY, built once in `before` and run by every container test (building is tested on its own). */
let appImage = '';
const APP_BODY = `served-${runId}\n`;

/** A fresh build context directory. */
async function contextDir(): Promise<string> {
  const dir = path.join(workDir, `ctx-${++counter}`);
  await mkdir(dir, { recursive: true });
  return dir;
}

/** Builds `dir` as a run-labelled image; resolves with its tag and id. */
async function build(
  dir: string,
  extra: { dockerfile?: string; labels?: Record<string, string>; sandbox?: BuildSandbox } = {},
): Promise<{ tag: string; imageId: string; output: string }> {
  const tag = `slipway-test/engine-${runId.slice(0, 8)}:${++counter}`;
  let output = '';
  const { imageId } = await engine.buildImage({
    contextDir: dir,
    dockerfile: extra.dockerfile ?? 'Dockerfile',
    tag,
    labels: { ...runLabels, ...extra.labels },
    signal: AbortSignal.timeout(60_000),
    onOutput: (text) => {
      output += text;
    },
    sandbox: extra.sandbox ?? CONFINED,
  });
  return { tag, imageId, output };
}

/** Builds a busybox httpd app serving `body`; resolves with its tag. */
async function buildApp(body: string, port = 8080): Promise<string> {
  const dir = await contextDir();
  await writeBusyboxApp(dir, { body, port });
  return (await build(dir)).tag;
}

function runOptions(image: string, overrides: Partial<RunContainerOptions> = {}): RunContainerOptions {
  const buildId = randomUUID();
  return {
    image,
    name: containerName(runId, buildId),
    labels: { ...runLabels, [LABEL_DEPLOYMENT]: runId, [LABEL_BUILD]: buildId },
    env: { PORT: '8080' },
    containerPort: 8080,
    memoryBytes: 64 * MB,
    nanoCpus: 500_000_000,
    pidsLimit: 64,
    network: NETWORK,
    ...overrides,
  };
}

/** GET http://127.0.0.1:port/ once, with a short time limit. */
function get(port: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', timeout: 2000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/** GET until the app answers (it needs a moment to start listening). */
async function getWhenUp(port: number, limitMs = 20_000): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    try {
      return await get(port);
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}

/** Runs `cmd` inside a running container through the engine's exec API; resolves with its output. */
const execIn = (containerId: string, cmd: string[]): Promise<string> => execInContainer(docker, containerId, cmd);

async function collect(iterable: AsyncIterable<string>): Promise<string> {
  let text = '';
  for await (const chunk of iterable) text += chunk;
  return text;
}

/** Polls `check` until it returns a value other than undefined. */
async function waitFor<T>(what: string, check: () => Promise<T | undefined>, limitMs = 10_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// npm test brings the engine up; without one these tests fail (a skipped test would prove nothing).
describe('DockerEngine (real engine)', () => {
  before(async () => {
    workDir = await mkdtemp(path.join(os.tmpdir(), 'slipway-engine-test-'));
    await ensureBusyboxImage(engine);
    await engine.ensureNetwork({ name: NETWORK, labels: runLabels, isolated: true });
    appImage = await buildApp(APP_BODY, 8080);
  });

  after(async () => {
    for (const c of await engine.listContainers({ [LABEL_RUN]: runId })) await engine.removeContainer(c.id);
    for (const i of await engine.listImages({ [LABEL_RUN]: runId })) await engine.removeImage(i.id);
    for (const n of await engine.listNetworks({ [LABEL_RUN]: runId })) await engine.removeNetwork(n.id);
    if (workDir !== '') await rm(workDir, { recursive: true, force: true });
  });

  test('ping reports the engine version', async () => {
    const { version, apiVersion } = await engine.ping();
    assert.match(version, /^\d+\.\d+/);
    assert.match(apiVersion, /^1\.\d+$/);
  });

  test('ensureBusyboxImage is idempotent', async () => {
    assert.equal(await ensureBusyboxImage(engine), BUSYBOX_IMAGE);
    assert.equal(await engine.imageExists(BUSYBOX_IMAGE), true);
  });

  // Independent builds (own context, tag and labels each): at once.
  describe('building', { concurrency: true }, () => {
    test('builds from a nested Dockerfile path, streams output and labels the image', async () => {
      const dir = await contextDir();
      await mkdir(path.join(dir, 'deploy', 'web'), { recursive: true });
      await writeFile(path.join(dir, 'hello.txt'), 'hi\n');
      await writeFile(
        path.join(dir, 'deploy', 'web', 'Dockerfile'),
        `FROM ${BUSYBOX_IMAGE}\nCOPY hello.txt /hello.txt\nRUN ["/bin/sh","-c","echo built-marker-$(cat /hello.txt)"]\n`,
      );
      const { tag, imageId, output } = await build(dir, { dockerfile: 'deploy/web/Dockerfile', labels: { [LABEL_BUILD]: 'b1' } });

      assert.match(imageId, /^sha256:[0-9a-f]{64}$/);
      assert.match(output, /Step 1\/\d+ : FROM/);
      assert.match(output, /built-marker-hi/);
      assert.equal(await engine.imageExists(tag), true);
      const images = await engine.listImages({ [LABEL_RUN]: runId, [LABEL_BUILD]: 'b1' });
      assert.equal(images.length, 1);
      assert.equal(images[0]?.id, imageId);
      assert.deepEqual(images[0]?.tags, [tag]);
      assert.equal(images[0]?.labels[LABEL_MANAGED], 'true');
    });

    test('the build context honours .dockerignore, exceptions included', async () => {
      const dir = await contextDir();
      await mkdir(path.join(dir, 'logs'), { recursive: true });
      await mkdir(path.join(dir, 'keep'), { recursive: true });
      await writeFile(path.join(dir, 'app.txt'), 'app');
      await writeFile(path.join(dir, 'secret.txt'), 'secret');
      await writeFile(path.join(dir, 'a.tmp'), 'tmp');
      await writeFile(path.join(dir, 'logs', 'x.log'), 'log');
      await writeFile(path.join(dir, 'keep', 'drop.txt'), 'drop');
      await writeFile(path.join(dir, 'keep', 'keep.txt'), 'keep');
      await writeFile(path.join(dir, '.dockerignore'), '# comment\nsecret.txt\n/logs/\n*.tmp\nkeep/*\n!keep/keep.txt\nDockerfile\n');
      const checks = [
        'test -e /ctx/app.txt',
        'test -e /ctx/keep/keep.txt',
        'test ! -e /ctx/secret.txt',
        'test ! -e /ctx/logs',
        'test ! -e /ctx/a.tmp',
        'test ! -e /ctx/keep/drop.txt',
      ].join(' && ');
      await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nCOPY . /ctx\nRUN ["/bin/sh","-c","${checks}"]\n`);
      await build(dir); // the RUN fails the build if the context holds the wrong files
    });

    test('a failing RUN throws EngineBuildError with the output tail', async () => {
      const dir = await contextDir();
      await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nRUN ["/bin/sh","-c","echo about-to-fail; exit 7"]\n`);
      const err = await build(dir).then(() => null, (e: unknown) => e);
      assert.ok(err instanceof EngineBuildError, `expected EngineBuildError, got ${String(err)}`);
      assert.match(err.outputTail, /about-to-fail/);
      assert.match(err.outputTail, /non-zero code: 7/);
      assert.match(err.message, /non-zero code: 7/);
    });

    test('a COPY of a missing file throws EngineBuildError naming it', async () => {
      const dir = await contextDir();
      await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nCOPY missing-file.txt /x\n`);
      const err = await build(dir).then(() => null, (e: unknown) => e);
      assert.ok(err instanceof EngineBuildError, `expected EngineBuildError, got ${String(err)}`);
      assert.match(err.outputTail, /missing-file\.txt/);
    });

    test('a Dockerfile path that does not exist throws EngineBuildError', async () => {
      const dir = await contextDir();
      await writeFile(path.join(dir, 'app.txt'), 'x');
      const err = await build(dir, { dockerfile: 'nope/Dockerfile' }).then(() => null, (e: unknown) => e);
      assert.ok(err instanceof EngineBuildError, `expected EngineBuildError, got ${String(err)}`);
      assert.match(err.outputTail, /Dockerfile/i);
    });

    test('imageExposedPorts lists EXPOSEd tcp ports, sorted', async () => {
      const dir = await contextDir();
      await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nEXPOSE 9000 53/udp\nEXPOSE 8080/tcp\n`);
      const { tag } = await build(dir);
      assert.deepEqual(await engine.imageExposedPorts(tag), [8080, 9000]);
      assert.deepEqual(await engine.imageExposedPorts(BUSYBOX_IMAGE), []);
    });

    test('listImages filters by labels; removeImage removes and ignores missing images', async () => {
      const dir = await contextDir();
      await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nLABEL purpose=remove-me\n`);
      const build1 = randomUUID();
      const { tag, imageId } = await build(dir, { labels: { [LABEL_BUILD]: build1 } });
      const listed = await engine.listImages({ [LABEL_RUN]: runId, [LABEL_BUILD]: build1 });
      assert.deepEqual(listed.map((i) => i.id), [imageId]);
      assert.equal(listed[0]?.labels['purpose'], 'remove-me');

      await engine.removeImage(tag);
      assert.equal(await engine.imageExists(tag), false);
      assert.deepEqual(await engine.listImages({ [LABEL_BUILD]: build1 }), []);
      await engine.removeImage(tag);
      await engine.removeImage('slipway-test/does-not-exist:nope');
    });
  });

  test('an aborted build rejects quickly with AbortError and leaves no build container running', async () => {
    const dir = await contextDir();
    const marker = `abort-${runId}`;
    await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nRUN ["/bin/sh","-c","echo ${marker}; sleep 30"]\n`);
    const controller = new AbortController();
    let abortedAt = 0;
    const err = await engine
      .buildImage({
        contextDir: dir,
        dockerfile: 'Dockerfile',
        tag: `slipway-test/engine-${runId.slice(0, 8)}:aborted`,
        labels: runLabels,
        signal: controller.signal,
        sandbox: CONFINED,
        onOutput: (text) => {
          if (text.includes(marker) && abortedAt === 0) {
            abortedAt = Date.now();
            controller.abort();
          }
        },
      })
      .then(() => null, (e: unknown) => e);
    assert.ok(abortedAt > 0, 'the RUN step started');
    assert.ok(err instanceof Error);
    assert.equal(err.name, 'AbortError');
    assert.ok(Date.now() - abortedAt < 3000, 'rejected soon after the abort');
    // The engine cancels the build when the connection closes and removes its container.
    await waitFor('the build container to go', async () => {
      const all = await docker.listContainers({ all: true });
      return all.some((c) => c.Command.includes(marker)) ? undefined : true;
    }, 15_000);
    assert.equal(await engine.imageExists(`slipway-test/engine-${runId.slice(0, 8)}:aborted`), false);
  });

  test('a build whose signal is already aborted rejects at once', async () => {
    const dir = await contextDir();
    await writeBusyboxApp(dir);
    const err = await engine
      .buildImage({ contextDir: dir, dockerfile: 'Dockerfile', tag: 'slipway-test/never:1', labels: runLabels, signal: AbortSignal.abort(), onOutput: () => {}, sandbox: TEST_BUILD_SANDBOX })
      .then(() => null, (e: unknown) => e);
    assert.ok(err instanceof Error);
    assert.equal(err.name, 'AbortError');
  });

  // Independent containers of the one app image (own name each, nothing shared they change): at once.
  describe('running', { concurrency: true }, () => {
    test('runContainer publishes the port on 127.0.0.1 and passes env, labels and limits', async () => {
      const body = APP_BODY;
      // PORT differs from the EXPOSEd port to show the app follows the environment.
      const options = runOptions(appImage, { env: { PORT: '8081', GREETING: 'a b=c' }, containerPort: 8081 });
      const info = await engine.runContainer(options);

      assert.equal(info.name, options.name);
      assert.equal(info.running, true);
      assert.equal(info.state, 'running');
      assert.equal(info.exitCode, null);
      assert.ok(info.hostPort !== null && info.hostPort > 0, 'a host port was published');
      // Labels of the image (and of its base) are inherited; the container's own win.
      for (const [key, value] of Object.entries(options.labels)) assert.equal(info.labels[key], value);

      const res = await getWhenUp(info.hostPort);
      assert.equal(res.status, 200);
      assert.equal(res.body, body);

      const raw = await docker.getContainer(info.id).inspect();
      assert.equal(raw.HostConfig.Memory, 64 * MB);
      assert.equal(raw.HostConfig.NanoCpus, 500_000_000);
      assert.equal(raw.HostConfig.RestartPolicy?.Name, 'unless-stopped');
      assert.deepEqual(raw.NetworkSettings.Ports['8081/tcp']?.map((b) => b.HostIp), ['127.0.0.1']);
      assert.ok(raw.Config.Env.includes('GREETING=a b=c'));
      assert.equal(raw.Config.Tty, false);

      await engine.removeContainer(info.id);
    });

    test('runContainer confines the container: capabilities, no-new-privileges, pids, logs, init, network', async () => {
      const info = await engine.runContainer(runOptions(appImage, { pidsLimit: 77 }));
      const raw = await docker.getContainer(info.id).inspect();
      const host = raw.HostConfig;
      assert.deepEqual(host.CapDrop, ['ALL']);
      assert.deepEqual([...(host.CapAdd ?? [])].sort(), [...APP_CAPABILITIES].sort());
      assert.ok(!(host.CapAdd ?? []).includes('NET_RAW'));
      assert.deepEqual(host.SecurityOpt, ['no-new-privileges']);
      assert.equal(host.PidsLimit, 77);
      assert.deepEqual(host.LogConfig, { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } });
      assert.equal(host.Init, true);
      assert.equal(host.NetworkMode, NETWORK);
      assert.deepEqual(Object.keys(raw.NetworkSettings.Networks), [NETWORK]);
      assert.equal(host.Memory, 64 * MB);
      assert.equal(host.MemorySwap, 64 * MB);

      // Inside, the process really runs that way: the kernel's view of its capability sets and flags.
      const status = await execIn(info.id, ['cat', '/proc/self/status']);
      assert.match(status, /^NoNewPrivs:\s+1$/m);
      // CHOWN(0) KILL(5) SETGID(6) SETUID(7) NET_BIND_SERVICE(10): 0x4e1; NET_RAW (bit 13) is gone.
      assert.match(status, /^CapBnd:\s+0*4e1$/m);
      assert.equal((await execIn(info.id, ['cat', '/sys/fs/cgroup/pids/pids.max'])).trim(), '77');
      await engine.removeContainer(info.id);
    });

    test('with an init process, an app that leaves SIGTERM to its default action stops on SIGTERM (not killed)', async () => {
      // As PID 1 `sleep` would ignore SIGTERM and be killed after the grace period (exit 137).
      const info = await engine.runContainer(runOptions(appImage, { command: ['sleep', '600'] }));
      await engine.stopContainer(info.id, 60);
      const raw = await docker.getContainer(info.id).inspect();
      assert.equal(raw.State.ExitCode, 143, 'terminated by SIGTERM (128+15), not SIGKILL (137)');
      await engine.removeContainer(info.id);
    });

    test('stop, start and remove; missing containers are tolerated', async () => {
      const body = APP_BODY;
      const info = await engine.runContainer(runOptions(appImage));
      assert.ok(info.hostPort !== null);
      assert.equal((await getWhenUp(info.hostPort)).body, body);

      await engine.stopContainer(info.id, 2);
      const stopped = await engine.inspectContainer(info.id);
      assert.equal(stopped?.running, false);
      assert.equal(stopped?.state, 'exited');
      assert.equal(typeof stopped?.exitCode, 'number');
      assert.equal(stopped?.hostPort, null);
      await engine.stopContainer(info.id, 2); // already stopped

      const restarted = await engine.startContainer(info.id);
      assert.equal(restarted.running, true);
      assert.ok(restarted.hostPort !== null);
      assert.equal((await getWhenUp(restarted.hostPort)).body, body);
      const again = await engine.startContainer(info.id); // already running: no-op
      assert.equal(again.hostPort, restarted.hostPort);

      await engine.removeContainer(info.id);
      assert.equal(await engine.inspectContainer(info.id), null);
      await engine.removeContainer(info.id);
      await engine.stopContainer(info.id, 1);
      await assert.rejects(engine.startContainer(info.id));
    });

    test('listContainers filters by labels and includes stopped containers', async () => {
      const image = appImage;
      const deployment = randomUUID();
      const a = await engine.runContainer(runOptions(image, { labels: { ...runLabels, [LABEL_DEPLOYMENT]: deployment, [LABEL_BUILD]: 'a' }, name: containerName(deployment, 'a') }));
      const b = await engine.runContainer(runOptions(image, { labels: { ...runLabels, [LABEL_DEPLOYMENT]: deployment, [LABEL_BUILD]: 'b' }, name: containerName(deployment, 'b') }));
      await engine.stopContainer(a.id, 1);

      const both = await engine.listContainers({ [LABEL_RUN]: runId, [LABEL_DEPLOYMENT]: deployment });
      assert.deepEqual(both.map((c) => c.id).sort(), [a.id, b.id].sort());
      const listedA = both.find((c) => c.id === a.id);
      const listedB = both.find((c) => c.id === b.id);
      assert.equal(listedA?.running, false);
      assert.equal(listedA?.state, 'exited');
      assert.equal(typeof listedA?.exitCode, 'number');
      assert.equal(listedA?.name, containerName(deployment, 'a'));
      assert.equal(listedB?.running, true);
      assert.equal(listedB?.exitCode, null);
      assert.equal(listedB?.hostPort, b.hostPort);
      assert.equal(listedB?.labels[LABEL_BUILD], 'b');

      const onlyB = await engine.listContainers({ [LABEL_DEPLOYMENT]: deployment, [LABEL_BUILD]: 'b' });
      assert.deepEqual(onlyB.map((c) => c.id), [b.id]);
      assert.deepEqual(await engine.listContainers({ [LABEL_DEPLOYMENT]: randomUUID() }), []);

      await engine.removeContainer(a.id);
      await engine.removeContainer(b.id);
    });
  });

  test('containers on an isolated network cannot reach one another; on an open one they can', async () => {
    await engine.ensureNetwork({ name: OPEN_NETWORK, labels: runLabels, isolated: false });
    const image = appImage;
    const reach = async (network: string): Promise<string> => {
      const [a, b] = await Promise.all([engine.runContainer(runOptions(image, { network })), engine.runContainer(runOptions(image, { network }))]);
      try {
        const raw = await docker.getContainer(b.id).inspect();
        const address = raw.NetworkSettings.Networks[network]?.IPAddress;
        assert.ok(address !== undefined && address !== '', `b has an address on ${network}`);
        assert.ok(b.hostPort !== null);
        await getWhenUp(b.hostPort); // b serves (through its 127.0.0.1 port)
        // A dials b's bridge address from inside; the test only reads a's output via the engine.
        return await execIn(a.id, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${address} 8080; echo "exit=$?"`]);
      } finally {
        await engine.removeContainer(a.id);
        await engine.removeContainer(b.id);
      }
    };
    // The control and the experiment at once (each its own two containers).
    const [open, isolated] = await Promise.all([reach(OPEN_NETWORK), reach(NETWORK)]);
    assert.ok(open.includes(APP_BODY), `control: on an open network a reaches b: ${open}`);
    assert.ok(!isolated.includes(APP_BODY), isolated);
    assert.doesNotMatch(isolated, /HTTP\/1/);
    assert.match(isolated, /exit=1/);
    const info = await docker.getNetwork(NETWORK).inspect();
    assert.equal(info.Options?.['com.docker.network.bridge.enable_icc'], 'false');
  });

  test('ensureNetwork is idempotent and refuses an existing network that is not isolated', async () => {
    const first = await engine.ensureNetwork({ name: NETWORK, labels: runLabels, isolated: true });
    const again = await engine.ensureNetwork({ name: NETWORK, labels: runLabels, isolated: true });
    assert.equal(again.id, first.id);
    await engine.ensureNetwork({ name: OPEN_NETWORK, labels: runLabels, isolated: false });
    await assert.rejects(engine.ensureNetwork({ name: OPEN_NETWORK, labels: runLabels, isolated: true }), /not an isolated bridge/);
    const listed = await engine.listNetworks({ [LABEL_RUN]: runId });
    assert.ok(listed.some((n) => n.name === NETWORK && n.id === first.id));
    await engine.removeNetwork(OPEN_NETWORK);
    await engine.removeNetwork(OPEN_NETWORK); // already gone
    assert.ok(!(await engine.listNetworks({ [LABEL_RUN]: runId })).some((n) => n.name === OPEN_NETWORK));
  });

  test('logs: tail, follow until the container stops, and follow ended by a signal', async () => {
    const script = 'trap "echo bye; exit 0" TERM; for i in 1 2 3 4 5; do echo line $i; done; sleep 0.3; echo warn 6 >&2; while :; do sleep 0.1; done';
    const { id } = await engine.runContainer(runOptions(appImage, { command: ['/bin/sh', '-c', script] }));

    const all = await waitFor('all log lines', async () => {
      const text = await collect(engine.containerLogs(id, { follow: false }));
      return text.includes('warn 6') ? text : undefined;
    });
    assert.equal(all, 'line 1\nline 2\nline 3\nline 4\nline 5\nwarn 6\n');
    assert.equal(await collect(engine.containerLogs(id, { follow: false, tail: 2 })), 'line 5\nwarn 6\n');
    assert.equal(await collect(engine.containerLogs(id, { follow: false, tail: 0 })), '');

    // Follow ended by the caller's signal: the iteration just ends.
    const controller = new AbortController();
    let seen = '';
    for await (const chunk of engine.containerLogs(id, { follow: true, tail: 1, signal: controller.signal })) {
      seen += chunk;
      controller.abort();
    }
    assert.equal(seen, 'warn 6\n');

    // Follow ended by the container stopping.
    const started = Date.now();
    const following = collect(engine.containerLogs(id, { follow: true, tail: 1 }));
    await sleep(300);
    await engine.stopContainer(id, 5);
    const followed = await following;
    assert.equal(followed, 'warn 6\nbye\n');
    assert.ok(Date.now() - started < 8000);

    await engine.removeContainer(id);
  });
});

describe('engine helpers', () => {
  test('containerName gives a valid engine name from any ids', () => {
    const name = containerName('5F3A9C2E-1111-4aaa-8bbb-0123456789ab', 'b/../x y');
    assert.match(name, /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/);
    assert.equal(name, 'slipway-5f3a9c2e1111-bxy');
    assert.equal(containerName('---', '---'), 'slipway-x-x');
  });

  test('dockerignoreMatcher: globs, directories, exceptions, last match wins', () => {
    const excluded = dockerignoreMatcher('# c\n\nnode_modules\n*.log\n/build/\n**/*.bak\ndocs/*\n!docs/keep.md\n!important.log\n');
    assert.equal(excluded('node_modules', true), true);
    assert.equal(excluded('node_modules/x/y.js', false), true);
    assert.equal(excluded('src/node_modules', true), false);
    assert.equal(excluded('a.log', false), true);
    assert.equal(excluded('important.log', false), false);
    assert.equal(excluded('src/a.log', false), false);
    assert.equal(excluded('build/out.js', false), true);
    assert.equal(excluded('deep/er/x.bak', false), true);
    assert.equal(excluded('x.bak', false), true);
    assert.equal(excluded('docs/a.md', false), true);
    assert.equal(excluded('docs/keep.md', false), false);
    // An excluded directory is walked only when an exception may match inside it.
    assert.equal(excluded('docs/sub', true), true);
    assert.equal(dockerignoreMatcher('keep\n!keep/this.txt\n')('keep', true), false);
    assert.equal(dockerignoreMatcher('keep\n!keep/this.txt\n')('keep/that.txt', false), true);
    assert.equal(excluded('src/index.ts', false), false);
  });
});
