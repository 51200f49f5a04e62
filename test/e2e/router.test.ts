// The router on the real engine (one server per data plane): WebSocket upgrades, no failed request across redeploys, a restarted container, HAProxy killed, the server restarted.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import Dockerode from 'dockerode';
import WebSocket from 'ws';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, tarGzOf, tempDir, testEngine, upload } from '../helpers/apps.js';
import { execIn } from '../helpers/engine-exec.js';
import { ensureNodeImage, writeWebSocketEchoApp } from '../helpers/node-image.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

for (const plane of PLANES) describe(`router on the engine (${plane} data plane)`, () => {
  let ts: TestServer;
  /** The server started again on the first one's data directory (the last case, HAProxy plane). */
  let restarted: TestServer | undefined;
  let token: string;
  /** Apps deployed by the cases and what each serves: every one is served again after a restart. */
  const served: Array<{ subdomain: string; body: string }> = [];

  before(async () => {
    ts = await startTestServer({ SLIPWAY_DATA_PLANE: plane });
    assert.equal(ts.server.dataPlane, plane);
    token = (await ts.newUser('router')).token;
  });
  after(async () => {
    await restarted?.close();
    await ts.close(); // drops the first server's database when it has one of its own
  });

  test('a WebSocket echo app works through the router', async () => {
    await ensureNodeImage(testEngine());
    const dir = tempDir('ws');
    await writeWebSocketEchoApp(dir);
    const archive = await tarGzOf(dir);
    await fsp.rm(dir, { recursive: true, force: true });
    const { id, subdomain } = await createArchiveApp(ts, token, archive);
    const res = await deployAndWait(ts, token, id);
    assert.equal(res.status, 200, res.text);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'ws echo app\n');

    const socket = new WebSocket(`ws://127.0.0.1:${ts.port}/chat`, { headers: { host: `${subdomain}.localhost:${ts.port}` } });
    const replies: string[] = [];
    await new Promise<void>((resolve, reject) => {
      socket.on('open', () => {
        socket.send('hello');
        socket.send('world');
      });
      socket.on('message', (data) => {
        replies.push(String(data));
        if (replies.length === 2) resolve();
      });
      socket.on('error', reject);
      setTimeout(() => reject(new Error('no echo within 10 s')), 10_000).unref();
    });
    socket.close();
    assert.deepEqual(replies, ['echo:hello', 'echo:world']);
  });

  test('a stream of requests kept up across two redeploys sees no error', async () => {
    const v1 = await busyboxArchive({ body: 'v1\n' });
    const { id, subdomain } = await createArchiveApp(ts, token, v1.archive);
    assert.equal((await deployAndWait(ts, token, id)).status, 200);

    const pid = ts.server.haproxyPid();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    let running = true;
    const failures: string[] = [];
    const bodies = new Set<string>();
    let count = 0;
    const loops = [0, 1, 2, 3].map(async () => {
      while (running) {
        try {
          const res = await appRequest(ts.port, subdomain, { agent });
          count += 1;
          if (res.status !== 200) failures.push(`${res.status} ${res.body.slice(0, 80)}`);
          else bodies.add(res.body);
        } catch (err) {
          failures.push(String(err));
        }
      }
    });
    for (const body of ['v2\n', 'v3\n']) {
      const next = await busyboxArchive({ body });
      assert.equal((await upload(ts, token, id, next.archive)).status, 200);
      assert.equal((await deployAndWait(ts, token, id)).status, 200);
    }
    // The stream goes on until both old releases were drained, stopped and removed (not for a fixed while).
    await poll(async () => ((await testEngine().listContainers({ 'dev.slipway.deployment': id })).length === 1 ? true : undefined), 60_000, 'the old releases to be removed');
    running = false;
    await Promise.all(loops);
    agent.destroy();
    assert.deepEqual(failures, []);
    assert.ok(count > 50, `only ${count} requests were made`);
    assert.ok(bodies.has('v1\n') && bodies.has('v3\n'), [...bodies].join(','));
    // No reload and no restart: the same HAProxy process served the whole run.
    assert.equal(ts.server.haproxyPid(), pid);
    if (plane === 'haproxy') assert.ok(pid !== undefined);
    served.push({ subdomain, body: 'v3\n' });
  });

  test('a live container restarted by the engine on a new port is routed again', async () => {
    // It serves, and exits with an error once told to (a file made through the engine), only the first time.
    const crashOnce = 'if [ -f /www/.crashed ]; then exec httpd -f -p "$PORT" -h /www; fi; httpd -f -p "$PORT" -h /www & until [ -f /www/.crash ]; do sleep 1; done; touch /www/.crashed; exit 1';
    const app = await busyboxArchive({ body: 'phoenix\n' });
    const { id, subdomain } = await createArchiveApp(ts, token, app.archive);
    await upload(ts, token, id, app.archive, [
      'FROM slipway-test/busybox:latest',
      'COPY index.html /www/index.html',
      'EXPOSE 8080',
      `CMD ${JSON.stringify(['/bin/sh', '-c', crashOnce])}`,
      '',
    ].join('\n'));
    assert.equal((await deployAndWait(ts, token, id)).status, 200);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'phoenix\n');
    const [before] = await testEngine().listContainers({ 'dev.slipway.deployment': id });
    assert.ok(before?.hostPort != null);
    assert.equal(await execIn(new Dockerode(), before.id, ['touch', '/www/.crash']), '', 'the crash is asked for');
    // It exits, the restart policy starts the same container again on another port...
    const after = await poll(async () => {
      const [now] = await testEngine().listContainers({ 'dev.slipway.deployment': id });
      return now?.running === true && now.hostPort != null && now.hostPort !== before.hostPort ? now : undefined;
    }, 30_000, 'the engine to restart the container');
    assert.equal(after.id, before.id);
    // ...and the route follows it there.
    const res = await poll(async () => {
      const answer = await appRequest(ts.port, subdomain);
      return answer.status === 200 ? answer : undefined;
    }, 30_000, 'the restarted container to be routed');
    assert.equal(res.body, 'phoenix\n');
    const [still] = await testEngine().listContainers({ 'dev.slipway.deployment': id });
    assert.deepEqual([still?.id, still?.hostPort], [before.id, after.hostPort], 'served by the restarted container, not a replacement');
  });

  if (plane === 'haproxy') {
    test('HAProxy killed with SIGKILL is started again by the server with every route', async () => {
      const app = await busyboxArchive({ body: 'still here\n' });
      const { id, subdomain } = await createArchiveApp(ts, token, app.archive);
      assert.equal((await deployAndWait(ts, token, id)).status, 200);
      assert.equal((await appRequest(ts.port, subdomain)).body, 'still here\n');
      const pid = ts.server.haproxyPid();
      assert.ok(pid !== undefined);
      process.kill(pid, 'SIGKILL');
      const back = await poll(async () => {
        const res = await appRequest(ts.port, subdomain).catch(() => undefined);
        return res?.status === 200 ? res.body : undefined;
      }, 20_000, 'HAProxy to serve the app again');
      assert.equal(back, 'still here\n');
      assert.notEqual(ts.server.haproxyPid(), pid);
      // The API behind it is back too, and every other route.
      assert.equal((await ts.request('GET', '/healthz')).status, 200);
      for (const app of served) assert.equal((await appRequest(ts.port, app.subdomain)).body, app.body);
      served.push({ subdomain, body: 'still here\n' });
    });

    test('after a clean stop and a start on the same data directory every app is served again, by a new HAProxy', async () => {
      assert.ok(served.length > 0, 'the cases before deployed apps to serve again');
      const oldPid = ts.server.haproxyPid();
      assert.ok(oldPid !== undefined);
      await ts.server.close();
      // The server's stop stops its HAProxy.
      assert.throws(() => process.kill(oldPid, 0));
      // The same data directory and the same database (SQLite in it, or the first server's PostgreSQL one).
      restarted = await startTestServer({ SLIPWAY_DATA_PLANE: 'haproxy', SLIPWAY_DATABASE_URL: ts.config.databaseUrl ?? '' }, ts.dataDir);
      assert.equal(restarted.server.dataPlane, 'haproxy');
      assert.notEqual(restarted.server.haproxyPid(), oldPid);
      for (const app of served) {
        const res = await appRequest(restarted.port, app.subdomain);
        assert.deepEqual([res.status, res.body], [200, app.body], app.subdomain);
      }
    });
  }
});

/** Polls `check` every 50 ms until it returns a value (not undefined), for at most `timeoutMs`. */
async function poll<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last === undefined ? '' : `: ${String(last)}`}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
