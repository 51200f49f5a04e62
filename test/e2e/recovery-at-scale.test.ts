// Recovery with 20 apps on the real engine: the engine stops every container, the server restarts, the host reboots.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { appRequest, busyboxScriptArchive, eventually, testEngine } from '../helpers/apps.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

const APPS = 20;

/** The source of every app: busybox httpd serving $BODY (written at each start, so a container started again serves it too). */
async function sameForEveryApp(): Promise<Buffer> {
  return busyboxScriptArchive('mkdir -p /www && echo "$BODY" > /www/index.html && echo "listening on ${PORT:-8080}" && exec httpd -f -v -p "${PORT:-8080}" -h /www');
}

describe('recovery of 20 apps', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-recovery-20-'));
  const env = testEnv(dataDir, { SLIPWAY_MAX_CONCURRENT_BUILDS: '4', SLIPWAY_RECOVERY_CONCURRENCY: '6' });
  const engine = testEngine();
  let server: ServerProcess;
  let token: string;
  let instance: string;
  const apps: Array<{ id: string; subdomain: string; body: string; buildId: string }> = [];

  before(async () => {
    server = await spawnServerProcess(env);
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const sqlite = new Database(path.join(dataDir, 'slipway.db'), { readonly: true });
    instance = (sqlite.prepare('select id from instance').get() as { id: string }).id;
    sqlite.close();
    // Deployed in parallel to keep the suite short. Every app builds the same context (so after the
    // first the builds are the engine's cache hits) and serves its own body, from its own variable.
    const archive = await sameForEveryApp();
    const deployed = await Promise.all(
      Array.from({ length: APPS }, async (_, i) => {
        const subdomain = `many-${process.pid}-${i}`;
        const body = `app ${i}\n`;
        const created = await request(server.url, 'POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive' } });
        assert.equal(created.status, 201, created.text);
        const id = created.json.id as string;
        const vars = await request(server.url, 'PATCH', `/api/v1/deployments/${id}/env`, { token, body: { vars: { BODY: body.trimEnd() } } });
        assert.equal(vars.status, 200, vars.text);
        const form = new FormData();
        form.append('archive', new Blob([archive]), 'a.tar.gz');
        assert.equal((await request(server.url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form })).status, 200);
        const build = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
        assert.equal(build.status, 200, build.text);
        return { id, subdomain, body, buildId: build.json.id as string };
      }),
    );
    apps.push(...deployed);
  });
  after(async () => {
    await server?.kill('SIGKILL');
    await removeEngineObjects(dataDir);
  });

  /** This installation's containers, by deployment. */
  async function containersByDeployment(): Promise<Map<string, Array<{ id: string; running: boolean }>>> {
    const byDeployment = new Map<string, Array<{ id: string; running: boolean }>>();
    for (const c of await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance })) {
      const key = c.labels[LABEL_DEPLOYMENT] ?? '';
      byDeployment.set(key, [...(byDeployment.get(key) ?? []), { id: c.id, running: c.running }]);
    }
    return byDeployment;
  }

  async function stopEveryContainer(): Promise<void> {
    const all = await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance });
    assert.equal(all.length, APPS);
    await Promise.all(all.map((c) => engine.stopContainer(c.id, 0)));
  }

  /** Every app answers its own body (waiting while recovery runs: 503 `starting` meanwhile). */
  async function everyAppServes(): Promise<void> {
    const port = server.port;
    await Promise.all(
      apps.map((app) =>
        eventually(async () => {
          const res = await appRequest(port, app.subdomain);
          if (res.status === 503) assert.match(res.body, /is starting|not available/);
          return res.status === 200 ? res : undefined;
        }, 120_000, `${app.subdomain} to answer 200`),
      ),
    );
    for (const app of apps) {
      const res = await appRequest(port, app.subdomain);
      assert.equal(res.status, 200);
      assert.equal(res.body, app.body);
    }
  }

  /** One running container per app, the live build's; and every build record as it was: one succeeded build each. */
  async function nothingDuplicatedOrLost(): Promise<void> {
    const byDeployment = await containersByDeployment();
    assert.equal(byDeployment.size, APPS, 'no container of another deployment');
    for (const app of apps) {
      const mine = byDeployment.get(app.id) ?? [];
      assert.equal(mine.length, 1, `${app.subdomain}: one container`);
      assert.equal(mine[0]?.running, true);
      const builds = await request(server.url, 'GET', `/api/v1/deployments/${app.id}/builds`, { token });
      assert.deepEqual(
        (builds.json as Array<{ id: string; status: string }>).map((b) => [b.id, b.status]),
        [[app.buildId, 'succeeded']],
      );
      const dep = (await request(server.url, 'GET', `/api/v1/deployments/${app.id}`, { token })).json;
      assert.equal(dep.status, 'running');
      assert.equal(dep.live_build_id, app.buildId);
    }
  }

  test('engine restart (every container stopped under a running server): the watcher brings each app back', async () => {
    await everyAppServes();
    await stopEveryContainer();
    await everyAppServes();
    await nothingDuplicatedOrLost();
  });

  test('server restart with the apps running: every app answers as soon as the server listens', async () => {
    await server.kill('SIGTERM');
    // The apps keep serving while the server is down (their containers run on).
    server = await spawnServerProcess(env);
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    for (const app of apps) {
      const res = await appRequest(server.port, app.subdomain);
      assert.equal(res.status, 200, `${app.subdomain} is routed before any recovery`);
      assert.equal(res.body, app.body);
    }
    await nothingDuplicatedOrLost();
  });

  test('host reboot (every container stopped while the server was down): the server listens, apps say starting, then all serve', async () => {
    await server.kill('SIGKILL');
    const before = await containersByDeployment();
    await stopEveryContainer();
    server = await spawnServerProcess(env);
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const health = await request(server.url, 'GET', '/healthz');
    assert.equal(health.status, 200, 'recovery does not make the server unhealthy');
    assert.equal(health.json.checks.recovery.ok, true);
    await everyAppServes();
    await nothingDuplicatedOrLost();
    // The same containers were started again (their state kept), not replaced.
    const now = await containersByDeployment();
    for (const app of apps) assert.deepEqual(now.get(app.id)?.map((c) => c.id), before.get(app.id)?.map((c) => c.id));
    await eventually(async () => {
      const h = await request(server.url, 'GET', '/healthz');
      return h.json.checks.recovery.detail === 'done' ? true : undefined;
    }, 30_000, '/healthz to say recovery is done');
  });
});
