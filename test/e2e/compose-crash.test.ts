// Crash mid-release of a compose set: SIGKILL the server while the new set starts; the next start serves the old set and removes the new set's containers and network.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { appRequest, eventually, testEngine } from '../helpers/apps.js';
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
${stuck ? `    healthcheck: {test: ["CMD", "false"], interval: 2s, retries: 1000}\n` : ''}`;
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

  test("SIGKILL while the new set starts: after the restart the old set serves, the new set's containers and network are gone", async () => {
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
    await upload(await archive(false, 'old set\n'));
    const first = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
    assert.equal(first.status, 200, first.text);
    assert.equal((await appRequest(server.port, subdomain)).body, 'old set\n');
    const mine = { [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id };
    const oldContainers = (await engine.listContainers(mine)).map((c) => c.id).sort();
    const oldNetworks = (await engine.listNetworks(mine)).map((n) => n.name);
    assert.equal(oldNetworks.length, 1, "the set's own network carries its deployment's labels");

    await upload(await archive(true, 'new set\n'));
    const building = await request(server.url, 'POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(building.status, 202, building.text);
    // The new set is up but not healthy: its containers and its network exist, the switch waits.
    await eventually(async () => {
      const log = await request(server!.url, 'GET', `/api/v1/deployments/${id}/builds/${building.json.id as string}/logs`, { token });
      return /==> starting service "worker"/.test(log.text) ? true : undefined;
    }, 240_000, 'the new set starting');
    const cut = await eventually(async () => {
      const containers = (await engine.listContainers(mine)).filter((c) => !oldContainers.includes(c.id));
      const networks = (await engine.listNetworks(mine)).filter((n) => !oldNetworks.includes(n.name));
      return containers.length === 2 && networks.length === 1 ? { containers: containers.map((c) => c.id), network: networks[0]!.name } : undefined;
    }, 30_000, 'the new set started');
    await server.kill('SIGKILL');
    assert.equal((await engine.listContainers(mine)).filter((c) => cut.containers.includes(c.id)).length, 2, 'the crash left them behind');

    server = await spawnServerProcess(env);
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const port = server.port;
    await eventually(async () => ((await appRequest(port, subdomain)).body === 'old set\n' ? true : undefined), 60_000, 'the old set serving');
    await eventually(async () => {
      const left = (await engine.listContainers(mine)).filter((c) => cut.containers.includes(c.id));
      const network = (await engine.listNetworks(mine)).some((n) => n.name === cut.network);
      return left.length === 0 && !network ? true : undefined;
    }, 60_000, "the cut set's containers and network removed");
    assert.deepEqual(
      (await engine.listContainers(mine)).filter((c) => oldContainers.includes(c.id)).map((c) => c.running),
      [true, true],
      'the old set untouched and running',
    );
    assert.ok((await engine.listNetworks(mine)).some((n) => n.name === oldNetworks[0]), "the live set's network kept");
  });
});
