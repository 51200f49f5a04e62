// A full server started and stopped several times in one process (each data plane; SQLite, or PostgreSQL with SLIPWAY_TEST_DATABASE_URL) leaves nothing behind.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import fs from 'node:fs';
import { connect, createServer } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, eventually, tempDir, testEngine } from '../helpers/apps.js';
import { freePort } from '../helpers/net.js';
import { PLANES } from '../helpers/planes.js';
import { removeInstanceObjects, startTestServer, testDatabase, type TestServer } from '../helpers/server.js';

const CYCLES = 3;
/** What an operating-system handle is, in async_hooks' words: sockets, servers, pipes, child processes, watchers, signals. */
const HANDLE_TYPES = new Set(['TCPWRAP', 'TCPSERVERWRAP', 'PIPEWRAP', 'PIPESERVERWRAP', 'PROCESSWRAP', 'FSEVENTWRAP', 'STATWATCHER', 'SIGNALWRAP', 'UDPWRAP']);

interface Tracked {
  readonly type: string;
  readonly resource: { hasRef?: () => boolean; _repeat?: number | null };
  readonly stack: string;
  readonly at: number;
}

/** Every handle and timer created from now on that is not closed (or fired) yet, with where it was made. */
function trackResources(): { live(): Tracked[]; disable(): void } {
  const live = new Map<number, Tracked>();
  const hook = createHook({
    init(id, type, _trigger, resource) {
      if (type === 'Timeout' || HANDLE_TYPES.has(type)) live.set(id, { type, resource: resource as Tracked['resource'], stack: new Error().stack ?? '', at: Date.now() });
    },
    destroy(id) {
      live.delete(id);
    },
  });
  hook.enable();
  return { live: () => [...live.values()], disable: () => hook.disable() };
}

/** The test's own waits (this file's and the polling helper's timers) are not the server's. */
const TEST_WAITS = /server-restarts\.test\.js|helpers\/apps\.js:\d+:\d+\)?\n\s+at new Promise/;

function serversOwn(tracked: readonly Tracked[]): Tracked[] {
  return tracked.filter((t) => !(t.type === 'Timeout' && TEST_WAITS.test(t.stack)));
}

/**
 * What a stopped server may still hold, after a moment to settle: nothing. A one-shot timer that
 * keeps no process up (unref'd: an AbortSignal.timeout of a call that ended) ends by itself and is
 * not a leak; an interval, a timer holding the process, any socket, server, pipe or child is.
 */
function leaks(tracked: readonly Tracked[]): string[] {
  return serversOwn(tracked)
    .filter((t) => t.type !== 'Timeout' || t.resource._repeat != null || t.resource.hasRef?.() === true)
    .map((t) => `${t.type} made at\n${t.stack.split('\n').slice(2, 9).join('\n')}`);
}

/** The kinds and counts of process.getActiveResourcesInfo(), timers aside (they come and go with every call). */
function activeHandles(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) if (type !== 'Timeout' && type !== 'FSReqCallback') counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

async function portRefuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

async function portBindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

for (const plane of PLANES) {
  const dialect = process.env['SLIPWAY_TEST_DATABASE_URL'] === undefined ? 'SQLite' : 'PostgreSQL';
  test(`a full server (${plane} plane, ${dialect}) started and stopped ${CYCLES} times leaves no handle, process, port or engine object`, async () => {
    const app = await busyboxArchive({ body: 'still here\n' });
    const engine = testEngine();
    const dataDir = tempDir('restarts');
    const database = await testDatabase();
    const port = await freePort();
    const overrides = { SLIPWAY_DATA_PLANE: plane, SLIPWAY_PORT: String(port), ...(database === undefined ? {} : { SLIPWAY_DATABASE_URL: database.url }) };
    const handlesBefore = activeHandles();
    const tracker = trackResources();
    let instanceId: string | undefined;
    let ts: TestServer | undefined;
    try {
      let deployment: { id: string; subdomain: string } | undefined;
      for (let cycle = 1; cycle <= CYCLES; cycle++) {
        ts = await startTestServer(overrides, dataDir);
        instanceId = ts.server.instanceId;
        assert.equal(ts.server.dataPlane, plane);
        assert.equal((await ts.request('GET', '/healthz')).status, 200);
        // One app across the restarts: deployed on the first start, served again after each, deleted on the last.
        if (cycle === 1) {
          deployment = await createArchiveApp(ts, ts.adminToken, app.archive);
          assert.equal((await deployAndWait(ts, ts.adminToken, deployment.id)).status, 200);
        }
        assert.ok(deployment !== undefined);
        const { subdomain } = deployment;
        const served = await eventually(async () => {
          const res = await appRequest(port, subdomain);
          return res.status === 200 ? res : undefined;
        }, 60_000, `the app served on start ${cycle}`);
        assert.equal(served.body, 'still here\n');
        if (cycle === CYCLES) assert.equal((await ts.request('DELETE', `/api/v1/deployments/${deployment.id}`, { token: ts.adminToken })).status, 204);
        const haproxyPid = ts.server.haproxyPid();
        assert.equal(haproxyPid !== undefined, plane === 'haproxy');

        await ts.server.close();
        ts = undefined;
        if (haproxyPid !== undefined) await eventually(async () => (processGone(haproxyPid) ? true : undefined), 10_000, 'HAProxy gone');
        assert.ok(await portRefuses(port), `nothing answers on port ${port} after stop ${cycle}`);
        assert.ok(await portBindable(port), `port ${port} can be bound again after stop ${cycle}`);
      }
      // Closed sockets and cleared timers are told to async_hooks a moment later.
      const left = await eventually(async () => {
        const found = leaks(tracker.live());
        return found.length === 0 ? found : undefined;
      }, 10_000, 'every handle closed').catch(() => leaks(tracker.live()));
      assert.deepEqual(left, [], `left after ${CYCLES} stops:\n${left.join('\n\n')}`);
      // Nothing still scheduling work: no timer or handle is made once the last server stopped.
      const quietSince = Date.now();
      await sleep(1500);
      const made = serversOwn(tracker.live()).filter((t) => t.at >= quietSince);
      assert.deepEqual(made.map((t) => t.type), [], `made after the last stop:\n${made.map((t) => t.stack).join('\n\n')}`);
      // No more handles of any kind than before the first start (one closing then may be gone since).
      const grown = [...activeHandles()].filter(([type, count]) => count > (handlesBefore.get(type) ?? 0));
      assert.deepEqual(grown, [], 'no more open handles than before the first start');
      assert.ok(instanceId !== undefined);
      const own = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId };
      await eventually(async () => ((await engine.listContainers(own)).length === 0 ? true : undefined), 30_000, 'no container of the installation');
      assert.deepEqual(await engine.listNetworks(own), [], 'no network of the installation');
    } finally {
      tracker.disable();
      await ts?.server.close();
      if (instanceId !== undefined) await removeInstanceObjects(instanceId);
      await database?.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
}
