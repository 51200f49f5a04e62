// End to end on the real engine: archive deploys, redeploy, rollback, stop/restart, failures, cancel, delete.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED } from '../../src/runtime/engine.js';
import {
  appRequest,
  busyboxArchive,
  createArchiveApp,
  deployAndWait,
  eventually,
  testEngine,
  upload,
} from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('archive deployments on the engine', () => {
  let ts: TestServer;
  let token: string;
  const engine = testEngine();

  before(async () => {
    ts = await startTestServer();
    token = (await ts.newUser('e2e')).token;
  });
  after(async () => {
    await ts.close();
  });

  const get = async (id: string) => (await ts.request('GET', `/api/v1/deployments/${id}`, { token })).json;

  test('deploy builds, runs and serves the app; redeploy switches; rollback serves the old build; restart while building is 409, rollback while building cancels it', async () => {
    const v1 = await busyboxArchive({ body: 'version one\n' });
    const { id, subdomain } = await createArchiveApp(ts, token, v1.archive);

    const trigger = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(trigger.status, 202);
    assert.equal(trigger.json.status, 'building');
    assert.equal(trigger.json.finished_at, null);
    assert.equal(trigger.json.commit_sha, crypto.createHash('sha256').update(v1.archive).digest('hex'));
    assert.equal((await get(id)).status, 'building');

    // The followed log ends when the build ends, and shows the build's steps.
    const followed = await ts.request('GET', `/api/v1/deployments/${id}/builds/${trigger.json.id}/logs?follow=true`, { token });
    assert.equal(followed.status, 200);
    assert.match(followed.text, /Step 1\/\d+ : FROM/);
    assert.match(followed.text, /live at build/);

    const build1 = (await ts.request('GET', `/api/v1/deployments/${id}/builds/${trigger.json.id}`, { token })).json;
    assert.equal(build1.status, 'succeeded');
    assert.ok(build1.finished_at);
    const dep = await get(id);
    assert.equal(dep.status, 'running');
    assert.equal(dep.live_build_id, build1.id);
    assert.equal(dep.url, `http://${subdomain}.localhost:${ts.port}/`);
    const served = await appRequest(ts.port, subdomain);
    assert.equal(served.status, 200);
    assert.equal(served.body, 'version one\n');

    // The container runs with labels, PORT, limits, and a port published on 127.0.0.1 only.
    const containers = await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id });
    assert.equal(containers.length, 1);
    const imageTags = (await engine.listImages({})).flatMap((i) => i.tags).filter((tag) => tag.includes(`/${id}:`));
    assert.equal(imageTags.length, 1);
    assert.match(imageTags[0] ?? '', new RegExp(`^slipway-[0-9a-f]{8}/${id}:${build1.id}$`));
    assert.equal(containers[0]?.labels['dev.slipway.build'], build1.id);

    const v2 = await busyboxArchive({ body: 'version two\n' });
    assert.equal((await upload(ts, token, id, v2.archive)).status, 200);
    // The upload alone changes nothing that is served.
    assert.equal((await appRequest(ts.port, subdomain)).body, 'version one\n');
    const build2 = await deployAndWait(ts, token, id);
    assert.equal(build2.status, 200);
    assert.equal(build2.json.status, 'succeeded');
    assert.equal((await appRequest(ts.port, subdomain)).body, 'version two\n');
    // The old container is drained and removed.
    await eventually(async () => {
      const list = await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id });
      return list.length === 1 ? true : undefined;
    }, 60_000, 'old container removal');

    const builds = (await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token })).json;
    assert.deepEqual(builds.map((b: { id: string }) => b.id), [build2.json.id, build1.id]);

    const rolled = await ts.request('POST', `/api/v1/deployments/${id}/rollback`, { token, body: { build_id: build1.id } });
    assert.equal(rolled.status, 200);
    assert.match(rolled.json.message, new RegExp(build1.id));
    assert.equal((await appRequest(ts.port, subdomain)).body, 'version one\n');
    assert.equal((await get(id)).live_build_id, build1.id);
    assert.equal((await get(id)).status, 'running');

    // Rollback to a build that does not exist, or is not a UUID, is 404 naming the build.
    const unknown = await ts.request('POST', `/api/v1/deployments/${id}/rollback`, { token, body: { build_id: crypto.randomUUID() } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error, 'not_found');
    assert.match(unknown.json.message, /build/);

    // Runtime logs of the live container, with tail.
    const logs = await ts.request('GET', `/api/v1/deployments/${id}/logs?tail=5`, { token });
    assert.equal(logs.status, 200);
    assert.match(logs.text, /listening on 8080/);

    // Restart while building is 409; rollback while building cancels the build and serves.
    const slow = await busyboxArchive({ extraDockerfile: 'RUN sleep 30' });
    assert.equal((await upload(ts, token, id, slow.archive)).status, 200);
    const building = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
    const restart = await ts.request('POST', `/api/v1/deployments/${id}/restart`, { token });
    assert.equal(restart.status, 409);
    assert.equal(restart.json.error, 'invalid_state');
    const rolledForward = await ts.request('POST', `/api/v1/deployments/${id}/rollback`, { token, body: { build_id: build2.json.id } });
    assert.equal(rolledForward.status, 200);
    assert.equal((await get(id)).status, 'running');
    assert.equal((await ts.request('GET', `/api/v1/deployments/${id}/builds/${building.json.id}`, { token })).json.status, 'cancelled');
    assert.equal((await appRequest(ts.port, subdomain)).body, 'version two\n');
  });

  test('stop answers 503 through the router, stop again is a no-op, restart serves again; a broken Dockerfile fails while the old release serves; delete removes containers, images and the route', async () => {
    const app = await busyboxArchive({ body: 'stoppable\n' });
    const { id, subdomain } = await createArchiveApp(ts, token, app.archive);
    const first = await deployAndWait(ts, token, id);
    assert.equal(first.status, 200);

    const stopped = await ts.request('POST', `/api/v1/deployments/${id}/stop`, { token });
    assert.equal(stopped.status, 200, stopped.text);
    assert.equal(typeof stopped.json.message, 'string');
    assert.equal((await get(id)).status, 'stopped');
    const unavailable = await appRequest(ts.port, subdomain);
    assert.equal(unavailable.status, 503);
    assert.match(unavailable.headers['content-type'] ?? '', /text\/html/);

    const again = await ts.request('POST', `/api/v1/deployments/${id}/stop`, { token });
    assert.equal(again.status, 200);
    assert.equal((await get(id)).status, 'stopped');

    const restarted = await ts.request('POST', `/api/v1/deployments/${id}/restart`, { token });
    assert.equal(restarted.status, 200);
    assert.equal((await get(id)).status, 'running');
    assert.equal((await appRequest(ts.port, subdomain)).body, 'stoppable\n');

    // Restart of a running deployment keeps it running and serving.
    assert.equal((await ts.request('POST', `/api/v1/deployments/${id}/restart`, { token })).status, 200);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'stoppable\n');

    // A broken Dockerfile fails the build, while the old release keeps serving.
    const broken = await busyboxArchive({ extraDockerfile: 'RUN echo about-to-fail && exit 3' });
    assert.equal((await upload(ts, token, id, broken.archive)).status, 200);
    const failed = await deployAndWait(ts, token, id);
    assert.equal(failed.status, 500);
    assert.equal(failed.json.error, 'build_failed');
    assert.match(failed.json.message, /about-to-fail|non-zero code: 3/);
    const dep = await get(id);
    assert.equal(dep.status, 'failed');
    assert.equal(dep.live_build_id, first.json.id);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'stoppable\n');
    const builds = (await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token })).json;
    assert.equal(builds[0].status, 'failed');
    assert.match(builds[0].error, /non-zero code: 3|about-to-fail/);
    // Rollback to a failed build is 409; restart from failed works when a build serves (failed → running).
    const bad = await ts.request('POST', `/api/v1/deployments/${id}/rollback`, { token, body: { build_id: builds[0].id } });
    assert.equal(bad.status, 409);
    assert.equal(bad.json.error, 'invalid_state');
    assert.equal((await ts.request('POST', `/api/v1/deployments/${id}/restart`, { token })).status, 200);
    assert.equal((await get(id)).status, 'running');
    assert.equal((await appRequest(ts.port, subdomain)).body, 'stoppable\n');

    // Delete removes containers, images and the route; the subdomain is free again.
    const del = await ts.request('DELETE', `/api/v1/deployments/${id}`, { token });
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    assert.equal((await ts.request('GET', `/api/v1/deployments/${id}`, { token })).status, 404);
    assert.equal((await appRequest(ts.port, subdomain)).status, 404);
    await eventually(async () => ((await engine.listContainers({ [LABEL_DEPLOYMENT]: id })).length === 0 ? true : undefined), 30_000, 'containers removed');
    const images = await engine.listImages({});
    assert.deepEqual(images.flatMap((i) => i.tags).filter((tag) => tag.includes(`/${id}:`)), []);
    const reused = await ts.request('POST', '/api/v1/deployments', { token, body: { name: 'again', subdomain, source_type: 'archive' } });
    assert.equal(reused.status, 201);
  });

  test('a pending deployment refuses stop, restart and rollback with 409 invalid_state', async () => {
    const app = await busyboxArchive();
    const { id, subdomain } = await createArchiveApp(ts, token, app.archive);
    for (const action of ['stop', 'restart']) {
      const res = await ts.request('POST', `/api/v1/deployments/${id}/${action}`, { token });
      assert.equal(res.status, 409, action);
      assert.equal(res.json.error, 'invalid_state');
    }
    // The state table's pending row: no build to roll back to, whatever id is named (409, not the 404 of an unknown build).
    const rollback = await ts.request('POST', `/api/v1/deployments/${id}/rollback`, { token, body: { build_id: crypto.randomUUID() } });
    assert.equal(rollback.status, 409, rollback.text);
    assert.equal(rollback.json.error, 'invalid_state');
    assert.equal((await get(id)).status, 'pending');
    // A pending app is not served yet.
    assert.equal((await appRequest(ts.port, subdomain)).status, 503);
  });

  test('an app that exits at once fails its release with its output, and a first failure serves 503', async () => {
    const app = await busyboxArchive({ exitAtOnce: true });
    const { id, subdomain } = await createArchiveApp(ts, token, app.archive);
    const res = await deployAndWait(ts, token, id);
    assert.equal(res.status, 500);
    assert.equal(res.json.error, 'build_failed');
    assert.match(res.json.message, /exit code 3|exited with code 3/);
    assert.match(res.json.message, /exiting at once/);
    const dep = await get(id);
    assert.equal(dep.status, 'failed');
    assert.equal(dep.live_build_id, null);
    assert.equal((await appRequest(ts.port, subdomain)).status, 503);
    // failed with nothing serving: stop and restart are 409
    assert.equal((await ts.request('POST', `/api/v1/deployments/${id}/stop`, { token })).status, 409);
    assert.equal((await ts.request('POST', `/api/v1/deployments/${id}/restart`, { token })).status, 409);
    // No container is left behind.
    assert.deepEqual(await engine.listContainers({ [LABEL_DEPLOYMENT]: id }), []);
  });

  test('a newer deploy cancels the build in flight; stop cancels a build too', async () => {
    // A step far longer than a build takes even on a loaded host: a new build that waited for it could not end in time.
    const slow = await busyboxArchive({ body: 'slow\n', extraDockerfile: 'RUN sleep 120' });
    const { id, subdomain } = await createArchiveApp(ts, token, slow.archive);
    const first = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(first.status, 202);
    await eventually(async () => {
      const log = await ts.request('GET', `/api/v1/deployments/${id}/builds/${first.json.id}/logs`, { token });
      return /sleep 120/.test(log.text) ? true : undefined;
    }, 30_000, 'the slow step to start');
    const slowStepSeen = Date.now();

    const fast = await busyboxArchive({ body: 'fast\n' });
    assert.equal((await upload(ts, token, id, fast.archive)).status, 200);
    const second = await deployAndWait(ts, token, id);
    assert.equal(second.status, 200);
    assert.ok(Date.now() - slowStepSeen < 100_000, 'the cancelled build did not hold the new one back (its step had not ended)');
    const cancelled = (await ts.request('GET', `/api/v1/deployments/${id}/builds/${first.json.id}`, { token })).json;
    assert.equal(cancelled.status, 'cancelled');
    assert.ok(cancelled.finished_at);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'fast\n');

    // stop while building: the build is cancelled and the deployment stopped.
    assert.equal((await upload(ts, token, id, slow.archive)).status, 200);
    const third = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal((await get(id)).status, 'building');
    const stop = await ts.request('POST', `/api/v1/deployments/${id}/stop`, { token });
    assert.equal(stop.status, 200);
    assert.equal((await get(id)).status, 'stopped');
    assert.equal((await ts.request('GET', `/api/v1/deployments/${id}/builds/${third.json.id}`, { token })).json.status, 'cancelled');
    assert.equal((await appRequest(ts.port, subdomain)).status, 503);
  });
});
