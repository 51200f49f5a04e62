// Crash mid-release of a compose set: SIGKILL the server while the set starts; the next start removes the set's containers and network (a crash leaks nothing) and queues the build again.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { eventually, testEngine } from '../helpers/apps.js';
import { BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { composeArchive } from '../helpers/compose-stack.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

/** web + a worker; `stuck` adds a worker whose health check never passes, so the release waits on it. */
function compose(stuck: boolean): string {
  return `
x-slipway: {web: web}
services:
  web:
    build: ./web
    expose: ["8080"]
  worker:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "while true; do sleep 1; done"]
${stuck ? `    healthcheck: {test: ["CMD", "false"], interval: 2s, retries: 100}\n` : ''}`;
}

const archive = (stuck: boolean, body: string): Promise<Buffer> => composeArchive(compose(stuck), body);

describe('a compose release cut short by a crash', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-compose-crash-'));
  const engine = testEngine();
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.kill('SIGKILL');
    await removeEngineObjects(dataDir);
    await fsp.rm(dataDir, { recursive: true, force: true });
  });

  test("SIGKILL while a set starts: the next start removes its containers and its network, and builds it again", async () => {
    const env = testEnv(dataDir, { SLIPWAY_PORT: '0', SLIPWAY_STARTUP_TIMEOUT_SECONDS: '30' });
    server = await spawnServerProcess(env);
    let token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const subdomain = `compose-crash-${process.pid}`;
    const created = await request(server.url, 'POST', '/api/v1/deployments', { token, body: { name: 'cc', subdomain, source_type: 'archive', compose_path: 'compose.yaml' } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const upload = async (bytes: Buffer): Promise<void> => {
      const form = new FormData();
      form.append('archive', new Blob([bytes]), 'a.tar.gz');
      assert.equal((await request(server!.url, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form })).status, 200);
    };
    const mine = { [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id };
    await upload(await archive(true, 'new set\n'));
    const building = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(building.status, 202, building.text);
    // The new set is up but not healthy: its containers and its network exist, the switch waits.
    let buildLog = '';
    await eventually(async () => {
      buildLog = (await request(server!.url, 'GET', `/api/v1/deployments/${id}/builds/${building.json.id as string}/logs`, { token })).text;
      if (/^==> failed: /m.test(buildLog)) throw new Error('the build failed');
      return /==> starting service "worker"/.test(buildLog) ? true : undefined;
    }, 240_000, 'the new set starting').catch((err: unknown) => {
      throw new Error(`${String(err)}; the build log:\n${buildLog.slice(-3000)}`);
    });
    const cut = await eventually(async () => {
      const containers = await engine.listContainers(mine);
      const networks = await engine.listNetworks(mine);
      return containers.length === 2 && networks.length === 1 ? { containers: containers.map((c) => c.id), network: networks[0]!.name } : undefined;
    }, 30_000, 'the new set started');
    await server.kill('SIGKILL');
    assert.equal((await engine.listContainers(mine)).filter((c) => cut.containers.includes(c.id)).length, 2, 'the crash left them behind');

    server = await spawnServerProcess(env);
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    // The cut set goes once recovery is done; the build is queued again and runs from the start.
    await eventually(async () => {
      const left = (await engine.listContainers(mine)).filter((c) => cut.containers.includes(c.id));
      const network = (await engine.listNetworks(mine)).some((n) => n.name === cut.network);
      return left.length === 0 && !network ? true : undefined;
    }, 60_000, "the cut set's containers and network removed");
    const log = await request(server.url, 'GET', `/api/v1/deployments/${id}/builds/${building.json.id as string}/logs`, { token });
    assert.match(log.text, /==> interrupted by a restart of the server; queued again, this build starts again from the beginning/);
  });
});
