// Crash recovery: SIGKILL the server mid-build, start it again, and find everything reconciled.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { LABEL_INSTANCE, LABEL_MANAGED, appNetworkName } from '../../src/runtime/engine.js';
import { appRequest, busyboxArchive, eventually, testEngine } from '../helpers/apps.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

describe('recovery after a crash', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-recovery-'));
  const engine = testEngine();
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.kill('SIGKILL');
    await removeEngineObjects(dataDir);
  });

  async function upload(url: string, token: string, id: string, archive: Buffer): Promise<void> {
    const form = new FormData();
    form.append('archive', new Blob([archive]), 'a.tar.gz');
    const res = await request(url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form });
    assert.equal(res.status, 200, res.text);
  }

  test('SIGKILL mid-build, then start: the live release serves, strays are removed, the build is built again and goes live', async () => {
    const env = testEnv(dataDir, { SLIPWAY_PORT: '0' });
    server = await spawnServerProcess(env);
    let token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const subdomain = `recover-${process.pid}`;
    const created = await request(server.url, 'POST', '/api/v1/deployments', { token, body: { name: 'r', subdomain, source_type: 'archive' } });
    assert.equal(created.status, 201);
    const id = created.json.id as string;

    const good = await busyboxArchive({ body: 'survivor\n' });
    await upload(server.url, token, id, good.archive);
    const first = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
    assert.equal(first.status, 200, first.text);
    assert.equal((await appRequest(server.port, subdomain)).body, 'survivor\n');

    // Slow enough that the release that served is back (and checked) before the build, run again, goes live.
    const slow = await busyboxArchive({ body: 'rebuilt\n', extraDockerfile: 'RUN sleep 30' });
    await upload(server.url, token, id, slow.archive);
    const building = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(building.status, 202);
    const buildId = building.json.id as string;
    await eventually(async () => {
      const log = await request(server!.url, 'GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token });
      return /sleep 30/.test(log.text) ? true : undefined;
    }, 30_000, 'the slow step');
    await server.kill('SIGKILL');

    // While the server is down, the live container vanishes too (e.g. the engine was pruned).
    const before = await engine.listContainers({ [LABEL_MANAGED]: 'true' });
    const live = before.find((c) => c.labels['dev.slipway.deployment'] === id && c.running);
    assert.ok(live, 'the live container is still running after the crash');
    await engine.removeContainer(live.id);
    // And a container labelled by this installation that its database does not know.
    const sqlite = new Database(path.join(dataDir, 'slipway.db'), { readonly: true });
    const instance = (sqlite.prepare('select id from instance').get() as { id: string }).id;
    sqlite.close();
    const stray = await engine.runContainer({
      image: `slipway-${instance.slice(0, 8)}/${id}:${first.json.id as string}`,
      name: `slipway-stray-${process.pid}`,
      labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance, 'dev.slipway.deployment': 'unknown' },
      env: { PORT: '8080' },
      containerPort: 8080,
      memoryBytes: 64 * 1024 * 1024,
      nanoCpus: 500_000_000,
      pidsLimit: 64,
      network: appNetworkName(instance),
    });
    // And a network labelled by this installation that is neither its app nor its build network.
    const strayNetwork = `slipway-${instance}-stray`;
    await engine.ensureNetwork({ name: strayNetwork, labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance }, isolated: true });

    server = await spawnServerProcess(env);
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    // The build answered 202 is not lost: the same record, still building (queued again), not failed.
    const interrupted = await request(server.url, 'GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token });
    assert.equal(interrupted.json.status, 'building');
    assert.equal(interrupted.json.error, null);
    assert.equal(interrupted.json.finished_at, null);
    const dep = (await request(server.url, 'GET', `/api/v1/deployments/${id}`, { token })).json;
    assert.equal(dep.status, 'building');
    assert.equal(dep.live_build_id, first.json.id);
    // The live release is started again from its image behind the listener (503 `starting` until then), and routed.
    const port = server.port;
    await eventually(async () => {
      const res = await appRequest(port, subdomain);
      if (res.status === 503) assert.match(res.body, /is starting/);
      return res.status === 200 ? res : undefined;
    }, 60_000, 'the live release to serve again');
    assert.equal((await appRequest(server.port, subdomain)).body, 'survivor\n');
    // Strays go once recovery is done.
    await eventually(async () => ((await engine.inspectContainer(stray.id)) === null ? true : undefined), 60_000, 'the stray container to be removed');
    const networks = await eventually(async () => {
      const names = (await engine.listNetworks({ [LABEL_INSTANCE]: instance })).map((n) => n.name);
      return names.includes(strayNetwork) ? undefined : names;
    }, 30_000, 'the stray network to be removed');
    assert.ok(networks.includes(appNetworkName(instance)), 'the app network stays');
    // The interrupted build is built again from the start and goes live; its log says why it ran twice.
    const rebuilt = await eventually(async () => {
      const res = await request(server!.url, 'GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token });
      return res.json.status === 'building' ? undefined : res.json;
    }, 180_000, 'the interrupted build to end');
    assert.equal(rebuilt.status, 'succeeded', String(rebuilt.error));
    const afterRebuild = (await request(server.url, 'GET', `/api/v1/deployments/${id}`, { token })).json;
    assert.equal(afterRebuild.status, 'running');
    assert.equal(afterRebuild.live_build_id, buildId);
    assert.equal((await appRequest(server.port, subdomain)).body, 'rebuilt\n');
    const log = (await request(server.url, 'GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token })).text;
    const restartedAt = log.indexOf('==> interrupted by a restart of the server; queued again, this build starts again from the beginning\n');
    assert.ok(restartedAt > log.indexOf('sleep 30'), log);
    assert.match(log.slice(restartedAt), new RegExp(`==> build ${buildId} [^]*sleep 30[^]*==> live at build ${buildId}\\n$`));
    // Nothing is stuck: a new deploy works.
    const fresh = await busyboxArchive({ body: 'after recovery\n' });
    await upload(server.url, token, id, fresh.archive);
    const next = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
    assert.equal(next.status, 200, next.text);
    assert.equal((await appRequest(server.port, subdomain)).body, 'after recovery\n');
  });
});
