// Replicas on the docker runtime: N containers behind the edge (both data planes), merged logs, summed metrics, replicas with volumes refused.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, eventually, testEngine, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A busybox app that serves its own hostname at /who.txt (each replica its own) and says so at start. */
const WHO_DOCKERFILE = [
  `FROM ${BUSYBOX_IMAGE}`,
  'COPY index.html /www/index.html',
  'EXPOSE 8080',
  `CMD ${JSON.stringify(['/bin/sh', '-c', 'hostname > /www/who.txt; echo "replica $(hostname) listening"; exec httpd -f -p "$PORT" -h /www'])}`,
  '',
].join('\n');

async function whoAnswers(port: number, subdomain: string, requests: number): Promise<Set<string>> {
  const seen = new Set<string>();
  for (let i = 0; i < requests; i++) {
    const res = await appRequest(port, subdomain, { path: '/who.txt' });
    assert.equal(res.status, 200, res.body);
    seen.add(res.body.trim());
  }
  return seen;
}

async function deploymentContainers(id: string): Promise<number> {
  return (await testEngine().listContainers({ 'dev.slipway.deployment': id })).length;
}

for (const plane of PLANES) describe(`replicas on the docker runtime (${plane} data plane)`, () => {
  let ts: TestServer;
  let token: string;

  before(async () => {
    ts = await startTestServer({ SLIPWAY_DATA_PLANE: plane });
    token = (await ts.newUser('replicas')).token;
  });
  after(async () => {
    await ts.close();
  });

  test('3 replicas: three containers, every one served through the edge; logs merged with [n] prefixes; metrics summed', async () => {
    const { archive } = await busyboxArchive();
    const { id, subdomain } = await createArchiveApp(ts, token, archive, { replicas: 3, memory_mb: 64 });
    assert.equal((await upload(ts, token, id, archive, WHO_DOCKERFILE)).status, 200);
    const shown = await ts.request('GET', `/api/v1/deployments/${id}`, { token });
    assert.equal(shown.json.replicas, 3);
    const deployed = await deployAndWait(ts, token, id);
    assert.equal(deployed.status, 200, deployed.text);
    assert.equal(await deploymentContainers(id), 3);
    const hosts = await whoAnswers(ts.port, subdomain, 45);
    assert.equal(hosts.size, 3, `three replicas answered: ${[...hosts].join(', ')}`);

    const logs = await eventually(async () => {
      const res = await ts.request('GET', `/api/v1/deployments/${id}/logs`, { token });
      assert.equal(res.status, 200, res.text);
      const lines = res.text.split('\n').filter((line) => line.includes('listening'));
      return lines.length === 3 ? lines : undefined;
    }, 20_000, 'the three replicas to log their start');
    assert.deepEqual(logs.map((line) => line.slice(0, 4)).sort(), ['[1] ', '[2] ', '[3] ']);
    assert.deepEqual(new Set(logs.map((line) => /replica (\S+) listening/.exec(line)?.[1])), hosts);

    const metrics = await ts.request('GET', `/api/v1/deployments/${id}/metrics`, { token });
    assert.equal(metrics.status, 200, metrics.text);
    const m = metrics.json as { memory_bytes: number; memory_limit_bytes: number; replicas: Array<{ replica: number; memory_bytes: number; memory_limit_bytes: number }> };
    assert.deepEqual(m.replicas.map((r) => r.replica).sort(), [1, 2, 3]);
    assert.equal(m.memory_limit_bytes, 3 * 64 * 1024 * 1024, 'the limits summed');
    assert.equal(m.memory_bytes, m.replicas.reduce((sum, r) => sum + r.memory_bytes, 0));

    // Scaled down: applies at the next restart, after which one container serves.
    const patched = await ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body: { replicas: 1 } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.replicas, 1);
    assert.equal(await deploymentContainers(id), 3, 'nothing changes before the restart');
    assert.equal((await ts.request('POST', `/api/v1/deployments/${id}/restart`, { token })).status, 200);
    assert.equal((await whoAnswers(ts.port, subdomain, 10)).size, 1);
    await eventually(async () => ((await deploymentContainers(id)) === 1 ? true : undefined), 60_000, 'the old replicas to be removed');
    const single = await ts.request('GET', `/api/v1/deployments/${id}/logs`, { token });
    assert.match(single.text, /^replica \S+ listening$/m, 'one replica: no prefix');
  });
});

describe('replicas: validation', () => {
  let ts: TestServer;
  let token: string;

  before(async () => {
    ts = await startTestServer({ SLIPWAY_DATA_PLANE: 'node' });
    token = (await ts.newUser('replicas-v')).token;
  });
  after(async () => {
    await ts.close();
  });

  const create = (body: Record<string, unknown>) =>
    ts.request('POST', '/api/v1/deployments', { token, body: { name: 'r', subdomain: `r-${process.pid}-${Math.random().toString(36).slice(2, 8)}`, source_type: 'archive', ...body } });

  test('replicas is 1 by default and 1–20 otherwise; more than 1 with volumes is a validation_error, and changes nothing', async () => {
    const plain = await create({});
    assert.equal(plain.status, 201, plain.text);
    const id = plain.json.id as string;
    assert.equal((await ts.request('GET', `/api/v1/deployments/${id}`, { token })).json.replicas, 1);
    for (const replicas of [0, 21, 1.5, '2', -1]) {
      assertError(await create({ replicas }), 400, 'validation_error', `create with ${JSON.stringify(replicas)}`);
      assertError(await ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body: { replicas } }), 400, 'validation_error', `patch ${JSON.stringify(replicas)}`);
    }
    assert.equal((await create({ replicas: 20 })).status, 201);

    const volume = [{ name: 'data', mount_path: '/data' }];
    assertError(await create({ replicas: 2, volumes: volume }), 400, 'validation_error', 'create with volumes');
    assert.equal((await create({ replicas: 1, volumes: volume })).status, 201);

    // Either side of the pair changed later.
    const withVolume = await create({ volumes: volume });
    const withVolumeId = withVolume.json.id as string;
    assertError(await ts.request('PATCH', `/api/v1/deployments/${withVolumeId}`, { token, body: { replicas: 2 } }), 400, 'validation_error', 'scale with volumes');
    const scaled = await ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body: { replicas: 4 } });
    assert.equal(scaled.status, 200);
    assertError(await ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body: { volumes: volume } }), 400, 'validation_error', 'volumes on a scaled deployment');
    const after = await ts.request('GET', `/api/v1/deployments/${id}`, { token });
    assert.equal(after.json.replicas, 4);
    assert.deepEqual(after.json.volumes, []);
    // Both at once, consistent: allowed.
    const both = await ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body: { replicas: 1, volumes: volume } });
    assert.equal(both.status, 200, both.text);
  });
});
