// The router on the real engine: WebSocket upgrades to an app, and no failed request across redeploys.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, eventually, tarGzOf, tempDir, testEngine, upload } from '../helpers/apps.js';
import { ensureNodeImage, writeWebSocketEchoApp } from '../helpers/node-image.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

for (const plane of PLANES) describe(`router on the engine (${plane} data plane)`, () => {
  let ts: TestServer;
  let token: string;

  before(async () => {
    ts = await startTestServer({ SLIPWAY_DATA_PLANE: plane });
    assert.equal(ts.server.dataPlane, plane);
    token = (await ts.newUser('router')).token;
  });
  after(async () => {
    await ts.close();
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
      await new Promise((resolve) => setTimeout(resolve, 1500));
    }
    running = false;
    await Promise.all(loops);
    agent.destroy();
    assert.deepEqual(failures, []);
    assert.ok(count > 50, `only ${count} requests were made`);
    assert.ok(bodies.has('v1\n') && bodies.has('v3\n'), [...bodies].join(','));
    // No reload and no restart: the same HAProxy process served the whole run.
    assert.equal(ts.server.haproxyPid(), pid);
    if (plane === 'haproxy') assert.ok(pid !== undefined);
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
      const served = await eventually(async () => {
        const res = await appRequest(ts.port, subdomain).catch(() => undefined);
        return res?.status === 200 ? res.body : undefined;
      }, 20_000, 'HAProxy to serve the app again');
      assert.equal(served, 'still here\n');
      assert.notEqual(ts.server.haproxyPid(), pid);
      // The API behind it is back too.
      assert.equal((await ts.request('GET', '/healthz')).status, 200);
    });
  }
});

for (const plane of PLANES) describe(`router follows a crashed container (${plane} data plane)`, () => {
  test('a live container restarted by the engine on a new port is routed again', async () => {
    const ts = await startTestServer({ SLIPWAY_DATA_PLANE: plane });
    try {
      const { token } = await ts.newUser('crash');
      const crashOnce = 'if [ -f /www/.crashed ]; then exec httpd -f -p "$PORT" -h /www; fi; httpd -f -p "$PORT" -h /www & sleep 2; touch /www/.crashed; exit 1';
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
      // It exits after 2 s, the restart policy starts it again on another port, and the route follows.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const served = await eventually(async () => {
        const res = await appRequest(ts.port, subdomain);
        return res.status === 200 ? res.body : undefined;
      }, 30_000, 'the restarted container to be routed');
      assert.equal(served, 'phoenix\n');
      const [after] = await testEngine().listContainers({ 'dev.slipway.deployment': id });
      assert.equal(after?.id, before?.id);
      assert.notEqual(after?.hostPort, before?.hostPort);
    } finally {
      await ts.close();
    }
  });
});

describe('router: a restarted server rebuilds HAProxy from the database (haproxy data plane)', () => {
  test('after a clean stop and a start on the same data directory every app is served again, by a new HAProxy', async () => {
    const first = await startTestServer({ SLIPWAY_DATA_PLANE: 'haproxy' });
    let second: TestServer | undefined;
    try {
      const { token } = await first.newUser('restart');
      const app = await busyboxArchive({ body: 'back again\n' });
      const { id, subdomain } = await createArchiveApp(first, token, app.archive);
      assert.equal((await deployAndWait(first, token, id)).status, 200);
      assert.equal((await appRequest(first.port, subdomain)).body, 'back again\n');
      const oldPid = first.server.haproxyPid();
      assert.ok(oldPid !== undefined);
      await first.server.close();
      // The server's stop stops its HAProxy.
      assert.throws(() => process.kill(oldPid, 0));
      // The same data directory and the same database (SQLite in it, or the first server's PostgreSQL one).
      second = await startTestServer({ SLIPWAY_DATA_PLANE: 'haproxy', SLIPWAY_DATABASE_URL: first.config.databaseUrl ?? '' }, first.dataDir);
      assert.equal(second.server.dataPlane, 'haproxy');
      assert.notEqual(second.server.haproxyPid(), oldPid);
      const res = await appRequest(second.port, subdomain);
      assert.deepEqual([res.status, res.body], [200, 'back again\n']);
    } finally {
      await second?.close();
      await first.close(); // drops the first server's database when it has one of its own
    }
  });
});
