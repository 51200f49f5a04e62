// End to end on the real engine: variables and PORT reach containers, build arguments reach builds (never secrets),
// changes apply at restart, rollback restores a build's configuration, volumes keep their data until delete.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { appRequest, deployAndWait, eventually, tarGzOf, tempDir, testEngine, upload, uniqueSubdomain } from '../helpers/apps.js';
import { assertNoLeak } from '../helpers/api-assert.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';
import { filesContaining } from '../helpers/files.js';

/**
 * An app that shows what it was given: at start it writes its environment to /www/env, appends a
 * line to /data/starts (a volume) and copies that file to /www/starts; at build time it writes the
 * build arguments it received to /www/buildargs. Then it serves /www on $PORT.
 */
async function configApp(): Promise<Buffer> {
  const dir = tempDir('config');
  const start = [
    'env > /www/env',
    'mkdir -p /data',
    'echo "start $(date +%s%N)" >> /data/starts',
    'cp /data/starts /www/starts',
    'echo "listening on $PORT"',
    'exec httpd -f -v -p "$PORT" -h /www',
  ].join('; ');
  await fsp.writeFile(
    path.join(dir, 'Dockerfile'),
    [
      `FROM ${BUSYBOX_IMAGE}`,
      'ARG BUILD_VISIBLE',
      'ARG SECRET_TOKEN',
      'ARG GREETING=default-greeting',
      'COPY index.html /www/index.html',
      'RUN echo "visible=$BUILD_VISIBLE secret=$SECRET_TOKEN greeting=$GREETING" > /www/buildargs',
      'EXPOSE 8080',
      `CMD ${JSON.stringify(['/bin/sh', '-c', start])}`,
      '',
    ].join('\n'),
  );
  await fsp.writeFile(path.join(dir, 'index.html'), 'config app\n');
  const archive = await tarGzOf(dir);
  await fsp.rm(dir, { recursive: true, force: true });
  return archive;
}

describe('app configuration on the engine', () => {
  let ts: TestServer;
  let token: string;
  const engine = testEngine();
  const secret = `sk_${crypto.randomBytes(16).toString('hex')}`;
  /** Every API answer the test saw: none may carry the secret. */
  const seen: HttpResult[] = [];

  before(async () => {
    await ensureBusyboxImage(engine);
    ts = await startTestServer({ SLIPWAY_DATABASE_URL: '' });
    token = (await ts.newUser('config-e2e')).token;
  });
  after(async () => {
    await ts.close();
  });

  const api = async (method: string, urlPath: string, body?: unknown): Promise<HttpResult> => {
    const res = await ts.request(method, urlPath, { token, ...(body === undefined ? {} : { body }) });
    seen.push(res);
    return res;
  };
  /** The app's environment as the container sees it (KEY=VALUE lines). */
  const containerEnv = async (subdomain: string): Promise<Map<string, string>> => {
    const res = await appRequest(ts.port, subdomain, { path: '/env' });
    assert.equal(res.status, 200, res.body);
    return new Map(res.body.trim().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
  };
  const starts = async (subdomain: string): Promise<number> => (await appRequest(ts.port, subdomain, { path: '/starts' })).body.trim().split('\n').length;

  test('variables, PORT, build arguments, restart, rollback and a volume across the whole lifecycle', async () => {
    const subdomain = uniqueSubdomain('cfg');
    const created = await api('POST', '/api/v1/deployments', {
      name: subdomain,
      subdomain,
      source_type: 'archive',
      volumes: [{ name: 'data', mount_path: '/data' }],
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    assert.equal((await upload(ts, token, id, await configApp())).status, 200);
    assert.equal((await api('PATCH', `/api/v1/deployments/${id}/env`, { vars: { GREETING: 'hello', BUILD_VISIBLE: 'bv-1', UNDECLARED_X: 'ux' } })).status, 200);
    assert.equal((await api('PATCH', `/api/v1/deployments/${id}/env`, { vars: { SECRET_TOKEN: secret }, secret: true })).status, 200);

    // Build 1: the container sees every variable (the secret too) and PORT; the build saw only declared, non-secret ones.
    const build1 = await deployAndWait(ts, token, id);
    seen.push(build1);
    assert.equal(build1.status, 200, build1.text);
    let env = await containerEnv(subdomain);
    assert.equal(env.get('GREETING'), 'hello');
    assert.equal(env.get('BUILD_VISIBLE'), 'bv-1');
    assert.equal(env.get('UNDECLARED_X'), 'ux');
    assert.equal(env.get('SECRET_TOKEN'), secret);
    assert.equal(env.get('PORT'), '8080');
    assert.equal((await appRequest(ts.port, subdomain, { path: '/buildargs' })).body, 'visible=bv-1 secret= greeting=hello\n');
    const log1 = await api('GET', `/api/v1/deployments/${id}/builds/${build1.json.id}/logs`);
    assert.doesNotMatch(log1.text, /not consumed/, 'only declared ARGs receive build arguments');
    assert.equal(await starts(subdomain), 1);

    // A change applies at restart, not before.
    assert.equal((await api('PATCH', `/api/v1/deployments/${id}/env`, { vars: { GREETING: 'two', UNDECLARED_X: null } })).status, 200);
    assert.equal((await containerEnv(subdomain)).get('GREETING'), 'hello', 'not applied before a restart');
    assert.equal((await api('POST', `/api/v1/deployments/${id}/restart`)).status, 200);
    env = await containerEnv(subdomain);
    assert.equal(env.get('GREETING'), 'two');
    assert.equal(env.has('UNDECLARED_X'), false);
    assert.equal(env.get('SECRET_TOKEN'), secret);
    assert.equal(await starts(subdomain), 2, 'the volume kept its data across the restart');

    // Build 2 is released with GREETING=three; rollback to build 1 brings back build 1's configuration.
    assert.equal((await api('PATCH', `/api/v1/deployments/${id}/env`, { vars: { GREETING: 'three', ADDED_LATER: 'yes' } })).status, 200);
    const build2 = await deployAndWait(ts, token, id);
    seen.push(build2);
    assert.equal(build2.status, 200, build2.text);
    assert.equal((await containerEnv(subdomain)).get('GREETING'), 'three');
    assert.equal((await appRequest(ts.port, subdomain, { path: '/buildargs' })).body, 'visible=bv-1 secret= greeting=three\n');
    assert.equal(await starts(subdomain), 3, 'the volume kept its data across a redeploy');

    assert.equal((await api('POST', `/api/v1/deployments/${id}/rollback`, { build_id: build1.json.id })).status, 200);
    env = await containerEnv(subdomain);
    assert.equal(env.get('GREETING'), 'two', "build 1's configuration (as it was last released)");
    assert.equal(env.has('ADDED_LATER'), false);
    const current = await api('GET', `/api/v1/deployments/${id}/env`);
    assert.deepEqual(
      current.json.vars.map((v: { key: string; value: string | null }) => [v.key, v.value]),
      [['BUILD_VISIBLE', 'bv-1'], ['GREETING', 'two'], ['SECRET_TOKEN', null]],
      'the rolled-back configuration is current again',
    );
    assert.equal(await starts(subdomain), 4, 'the volume kept its data across a rollback');

    // Stop, then start again: the data is still there.
    assert.equal((await api('POST', `/api/v1/deployments/${id}/stop`)).status, 200);
    assert.equal((await api('POST', `/api/v1/deployments/${id}/restart`)).status, 200);
    assert.equal(await starts(subdomain), 5, 'the volume kept its data across stop and start');
    assert.equal((await containerEnv(subdomain)).get('GREETING'), 'two');

    // Rolling forward restores build 2's configuration.
    assert.equal((await api('POST', `/api/v1/deployments/${id}/rollback`, { build_id: build2.json.id })).status, 200);
    assert.equal((await containerEnv(subdomain)).get('GREETING'), 'three');
    assert.equal((await containerEnv(subdomain)).get('ADDED_LATER'), 'yes');

    // The volume is a labelled engine object of this deployment, removed with it.
    const volumes = await engine.listVolumes({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id });
    assert.equal(volumes.length, 1);
    assert.equal(volumes[0]?.labels['dev.slipway.instance'], ts.server.instanceId);

    for (const res of [...seen, await api('GET', `/api/v1/deployments/${id}`), await api('GET', `/api/v1/deployments/${id}/builds`)]) assertNoLeak(res, [secret]);
    for (const build of [build1, build2]) assertNoLeak(await api('GET', `/api/v1/deployments/${id}/builds/${build.json.id}/logs`), [secret]);
    assert.deepEqual(filesContaining(ts.dataDir, secret), [], 'the secret is nowhere under the data directory');
    assert.deepEqual(filesContaining(ts.dataDir, 'bv-1'), [], 'nor is an ordinary value');

    assert.equal((await api('DELETE', `/api/v1/deployments/${id}`)).status, 204);
    await eventually(async () => ((await engine.listVolumes({ [LABEL_DEPLOYMENT]: id })).length === 0 ? true : undefined), 30_000, 'volume removal');
  });

  test('a volume removed from the list is not mounted by the next release; its data returns when it is listed again', async () => {
    const subdomain = uniqueSubdomain('vol');
    const created = await api('POST', '/api/v1/deployments', { name: subdomain, subdomain, source_type: 'archive', volumes: [{ name: 'data', mount_path: '/data' }] });
    const id = created.json.id as string;
    assert.equal((await upload(ts, token, id, await configApp())).status, 200);
    assert.equal((await deployAndWait(ts, token, id)).status, 200);
    assert.equal(await starts(subdomain), 1);
    assert.equal((await api('PATCH', `/api/v1/deployments/${id}`, { volumes: [] })).status, 200);
    assert.equal((await api('POST', `/api/v1/deployments/${id}/restart`)).status, 200);
    assert.equal(await starts(subdomain), 1, 'a fresh /data without the volume');
    assert.equal((await api('PATCH', `/api/v1/deployments/${id}`, { volumes: [{ name: 'data', mount_path: '/data' }] })).status, 200);
    assert.equal((await api('POST', `/api/v1/deployments/${id}/restart`)).status, 200);
    assert.equal(await starts(subdomain), 2, 'the same data again');
    assert.equal((await api('DELETE', `/api/v1/deployments/${id}`)).status, 204);
    assert.deepEqual(await engine.listVolumes({ [LABEL_DEPLOYMENT]: id }), []);
    assert.ok(fs.existsSync(ts.dataDir));
  });

  test('start-up recovery starts a vanished live container with its build\'s configuration and volume; volumes of deleted deployments go', async () => {
    const dataDir = tempDir('config-recovery');
    const first = await startTestServer({ SLIPWAY_DATABASE_URL: '' }, dataDir);
    const user = await first.newUser('recovery');
    const subdomain = uniqueSubdomain('rec');
    const created = await first.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: subdomain, subdomain, source_type: 'archive', volumes: [{ name: 'data', mount_path: '/data' }] },
    });
    const id = created.json.id as string;
    assert.equal((await upload(first, user.token, id, await configApp())).status, 200);
    await first.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { GREETING: 'recorded' } } });
    assert.equal((await deployAndWait(first, user.token, id)).status, 200);
    // A change after the deploy is not what the build was released with.
    await first.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { GREETING: 'later' } } });
    await first.server.close(); // the server stops; its containers keep running
    const instance = first.server.instanceId;
    for (const c of await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id })) await engine.removeContainer(c.id);
    // A volume of a deployment the database no longer knows (a delete cut short).
    const stray = `slipway-${instance.slice(0, 8)}-${crypto.randomUUID()}-data`;
    await engine.ensureVolume({ name: stray, labels: { [LABEL_MANAGED]: 'true', 'dev.slipway.instance': instance, [LABEL_DEPLOYMENT]: crypto.randomUUID() } });

    const second = await startTestServer({ SLIPWAY_DATABASE_URL: '' }, dataDir);
    try {
      // The release is started again behind the listener: 503 `starting` until it is healthy.
      const env = await eventually(async () => {
        const res = await appRequest(second.port, subdomain, { path: '/env' });
        if (res.status === 503) assert.match(res.body, /is starting/);
        else assert.equal(res.status, 200, res.body);
        return res.status === 200 ? res.body : undefined;
      }, 60_000, 'the recovered release to serve');
      assert.match(env, /^GREETING=recorded$/m);
      const startsBody = (await appRequest(second.port, subdomain, { path: '/starts' })).body;
      assert.equal(startsBody.trim().split('\n').length, 2, 'the same volume, one more start');
      assert.deepEqual((await engine.listVolumes({ [LABEL_MANAGED]: 'true', 'dev.slipway.instance': instance })).map((v) => v.name).filter((n) => n === stray), []);
      assert.equal((await engine.listVolumes({ [LABEL_DEPLOYMENT]: id })).length, 1, 'the live deployment keeps its volume');
    } finally {
      await second.close();
    }
  });
});
