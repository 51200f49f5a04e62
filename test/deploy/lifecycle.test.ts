// The lifecycle on a fake runtime and a fake data plane (no Docker): deploy, fail, cancel, stop, restart, rollback, delete, crash recovery.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DomainError } from '../../src/core/errors.js';
import type { Principal } from '../../src/core/principal.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import { DbAppConfigStore } from '../../src/db/app-config-store.js';
import { databaseDeploymentStore } from '../../src/db/deployment-store.js';
import { BuildLogStore } from '../../src/deploy/build-logs.js';
import { DeploymentLifecycle } from '../../src/deploy/lifecycle.js';
import { LocalBuildQueue, type BuildQueue } from '../../src/deploy/build-queue.js';
import { FairBuildSlots } from '../../src/deploy/fair-build-slots.js';
import { planRecovery } from '../../src/deploy/reconcile.js';
import { createDeployment } from '../../src/domain/deployments.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { SourceStore } from '../../src/source/source-store.js';
import { FakeDataPlane } from '../helpers/fake-data-plane.js';
import { FakeRuntime } from '../helpers/fake-runtime.js';

const INSTANCE = '11111111-2222-4333-8444-555555555555';
const RUNNER = 'aaaaaaaa-2222-4333-8444-555555555555';
const settings = {
  instanceId: INSTANCE,
  allowPrivateGit: false,
  buildTimeoutMs: 30_000,
  startupTimeoutMs: 1_500,
  keepImages: 5,
  defaultMemoryBytes: 64 * 1024 * 1024,
  defaultNanoCpus: 1e9,
  appPidsLimit: 100,
  build: { network: 'none' as const, memoryBytes: 256 * 1024 * 1024, nanoCpus: 1e9, pidsLimit: 100 },
  maxConcurrentBuilds: 2,
  recoveryConcurrency: 4,
  gitEnv: { PATH: '/usr/bin:/bin' },
};

let dir: string;
let db: Db;
let runtime: FakeRuntime;
let dataPlane: FakeDataPlane;
let sources: SourceStore;
let lifecycle: DeploymentLifecycle;
let configs: DbAppConfigStore;
const principal: Principal = { userId: crypto.randomUUID(), isAdmin: false, via: 'session', sessionId: 's', apiKeyId: undefined };

function newLifecycle(plane: FakeDataPlane, overrides: Partial<typeof settings> = {}): DeploymentLifecycle {
  return new DeploymentLifecycle({
    store: databaseDeploymentStore(db, RUNNER),
    configs,
    engine: runtime,
    dataPlane: plane,
    sources,
    buildLogs: new BuildLogStore(dir),
    log: () => undefined,
    settings: { ...settings, ...overrides, dataDir: dir },
  });
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-lifecycle-'));
  db = await openDatabase({ file: path.join(dir, 'slipway.db') });
  await db.insertInto('users').values({ id: principal.userId, email: 'life@example.test', password_hash: 'x', is_admin: 0, created_at: 't', updated_at: 't' }).execute();
  runtime = new FakeRuntime();
  dataPlane = new FakeDataPlane();
  sources = new SourceStore(dir);
  configs = new DbAppConfigStore(db, new ValueCipher(crypto.randomBytes(32)));
  lifecycle = newLifecycle(dataPlane);
});

after(async () => {
  await lifecycle.close();
  await runtime.close();
  await db.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A new archive deployment (registered with the data plane, as the API does). */
async function newDeployment(label: string): Promise<{ id: string; subdomain: string }> {
  const row = await createDeployment({ deployments: databaseDeploymentCatalog(db), allowPrivateGit: false, checkRepoHost: async () => undefined, limits: { maxMemoryMb: 1024, maxCpus: 2 } }, principal, {
    name: label,
    subdomain: `life-${label}`,
    source_type: 'archive',
  });
  lifecycle.registered(row);
  return { id: row.id, subdomain: row.subdomain };
}

/** An upload whose Dockerfile is `dockerfile` (the fake reads FAIL / WAIT / UNHEALTHY lines). */
async function upload(deploymentId: string, dockerfile: string): Promise<void> {
  const uploadId = crypto.randomUUID();
  const src = sources.sourceDir(deploymentId, uploadId);
  fs.mkdirSync(src, { recursive: true });
  fs.writeFileSync(path.join(src, 'Dockerfile'), `${dockerfile}\n`);
  const sha = crypto.createHash('sha256').update(uploadId).digest('hex');
  await db.updateTable('deployments').set({ upload_id: uploadId, upload_sha256: sha, upload_size: 1 }).where('id', '=', deploymentId).execute();
}

const deployment = (id: string) => db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const build = (id: string) => db.selectFrom('builds').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** The body the route's upstream answers (the fake app answers its build id). */
async function served(subdomain: string): Promise<string> {
  const answer = dataPlane.answer(subdomain);
  if (typeof answer === 'string') return answer;
  const res = await fetch(`http://${answer.host}:${answer.port}/`, { signal: AbortSignal.timeout(5000) });
  return (await res.text()).trim();
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function rejectsWith(promise: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof DomainError, String(err));
    assert.equal(err.code, code);
    if (message !== undefined) assert.match(err.message, message);
    return true;
  });
}

describe('lifecycle on a fake runtime and data plane', () => {
  test('deploy: the build succeeds, the deployment runs, its host serves the new container', async () => {
    const dep = await newDeployment('deploy');
    assert.equal(dataPlane.answer(dep.subdomain), '503', 'a registered deployment is not served yet');
    await upload(dep.id, 'FROM scratch');
    const finished = await lifecycle.deploy(principal, dep.id, { wait: true });
    assert.equal(finished.status, 'succeeded');
    assert.equal((await deployment(dep.id)).status, 'running');
    assert.equal((await deployment(dep.id)).live_build_id, finished.id);
    assert.equal(await served(dep.subdomain), finished.id);
    assert.equal(runtime.running(dep.id).length, 1);
  });

  test('a failed build: status failed, the release that served keeps serving, its image is removed', async () => {
    const dep = await newDeployment('fail');
    await upload(dep.id, 'FROM scratch');
    const good = await lifecycle.deploy(principal, dep.id, { wait: true });
    await upload(dep.id, 'FAIL');
    await rejectsWith(lifecycle.deploy(principal, dep.id, { wait: true }), 'build_failed', /the fake build step failed/);
    const row = await deployment(dep.id);
    assert.equal(row.status, 'failed');
    assert.equal(row.live_build_id, good.id);
    assert.equal(await served(dep.subdomain), good.id);
    const failed = await db.selectFrom('builds').selectAll().where('deployment_id', '=', dep.id).where('status', '=', 'failed').executeTakeFirstOrThrow();
    assert.equal(failed.image_id, null);

    // With a health-check path, a release must answer 2xx/3xx there before it takes traffic.
    await db.updateTable('deployments').set({ health_check_path: '/health' }).where('id', '=', dep.id).execute();
    await upload(dep.id, 'UNHEALTHY');
    await rejectsWith(lifecycle.deploy(principal, dep.id, { wait: true }), 'build_failed', /did not become healthy/);
    assert.equal(await served(dep.subdomain), good.id, 'an unhealthy release never takes traffic');
    assert.equal(runtime.running(dep.id).length, 1, 'the unhealthy container is removed');

    const fresh = await newDeployment('fail-first');
    await upload(fresh.id, 'FAIL');
    await rejectsWith(lifecycle.deploy(principal, fresh.id, { wait: true }), 'build_failed');
    assert.equal(dataPlane.answer(fresh.subdomain), '503', 'a deployment that never ran answers 503');
  });

  test("a build past its time limit fails saying so, and only then: a shorter step's limit is not reported as the build's", async () => {
    const limited = newLifecycle(dataPlane, { buildTimeoutMs: 1000 });
    try {
      const dep = await newDeployment('time-limit');
      await upload(dep.id, 'WAIT');
      await rejectsWith(limited.deploy(principal, dep.id, { wait: true }), 'build_failed', /^the build exceeded its time limit of 1 s$/);
      const failed = await db.selectFrom('builds').selectAll().where('deployment_id', '=', dep.id).executeTakeFirstOrThrow();
      assert.equal(failed.error, 'the build exceeded its time limit of 1 s');
      // An engine call timing out well inside the limit names itself.
      const buildImage = runtime.buildImage.bind(runtime);
      runtime.buildImage = async () => {
        throw Object.assign(new Error('Docker engine: build image did not finish within 30s'), { name: 'TimeoutError' });
      };
      try {
        await upload(dep.id, 'FROM scratch');
        await rejectsWith(limited.deploy(principal, dep.id, { wait: true }), 'build_failed', /^Docker engine: build image did not finish within 30s$/);
      } finally {
        runtime.buildImage = buildImage;
      }
    } finally {
      await limited.close();
    }
  });

  test('cancel: a newer deploy cancels the build in flight; stop cancels it too', async () => {
    const dep = await newDeployment('cancel');
    await upload(dep.id, 'WAIT');
    const first = await lifecycle.deploy(principal, dep.id, { wait: false });
    await until('the first build to start', () => runtime.heldBuilds === 1);
    await upload(dep.id, 'FROM scratch');
    const second = await lifecycle.deploy(principal, dep.id, { wait: true });
    assert.equal((await build(first.id)).status, 'cancelled');
    assert.match((await build(first.id)).error ?? '', /superseded by a newer deploy/);
    assert.equal(second.status, 'succeeded');
    assert.equal(await served(dep.subdomain), second.id);

    await upload(dep.id, 'WAIT');
    const third = await lifecycle.deploy(principal, dep.id, { wait: false });
    assert.equal((await deployment(dep.id)).status, 'building');
    await until('the third build to start', () => runtime.heldBuilds === 1);
    assert.deepEqual(await lifecycle.stop(principal, dep.id), { message: 'deployment cancel stopped' });
    assert.equal((await build(third.id)).status, 'cancelled');
    assert.equal((await deployment(dep.id)).status, 'stopped');
    assert.equal(dataPlane.answer(dep.subdomain), '503');
  });

  test('stop: drained, stopped, 503; a second stop is a no-op; restart brings it back on a new container', async () => {
    const dep = await newDeployment('stop');
    await rejectsWith(lifecycle.stop(principal, dep.id), 'invalid_state', /never been deployed/);
    await rejectsWith(lifecycle.restart(principal, dep.id), 'invalid_state', /never been deployed/);
    await upload(dep.id, 'FROM scratch');
    const live = await lifecycle.deploy(principal, dep.id, { wait: true });
    const upstream = dataPlane.answer(dep.subdomain);
    assert.ok(typeof upstream === 'object');
    assert.deepEqual(await lifecycle.stop(principal, dep.id), { message: 'deployment stop stopped' });
    assert.ok(dataPlane.calls.includes(`drain ${upstream.host}:${upstream.port}`), 'the live upstream is drained before the stop');
    assert.equal((await deployment(dep.id)).status, 'stopped');
    assert.equal(dataPlane.answer(dep.subdomain), '503');
    assert.equal(runtime.running(dep.id).length, 0);
    assert.deepEqual(await lifecycle.stop(principal, dep.id), { message: 'deployment stop is already stopped' });

    assert.deepEqual(await lifecycle.restart(principal, dep.id), { message: `deployment stop restarted (build ${live.id})` });
    await lifecycle.settle();
    assert.equal((await deployment(dep.id)).status, 'running');
    assert.equal(await served(dep.subdomain), live.id);
    assert.equal(runtime.running(dep.id).length, 1);
    assert.equal((await runtime.listContainers({ 'dev.slipway.deployment': dep.id })).length, 1, 'the old container is removed');
  });

  test('"is it serving" is read from the store: a lifecycle whose data plane never routed the app answers the same', async () => {
    const dep = await newDeployment('elsewhere');
    await upload(dep.id, 'FROM scratch');
    const good = await lifecycle.deploy(principal, dep.id, { wait: true });
    const upstream = dataPlane.answer(dep.subdomain);
    assert.ok(typeof upstream === 'object');
    // Another instance: same database, an edge of its own that has never seen this deployment.
    const otherPlane = new FakeDataPlane();
    const other = newLifecycle(otherPlane);
    try {
      // A build cancelled there: the release this instance started keeps serving.
      await upload(dep.id, 'WAIT');
      const waiting = await other.deploy(principal, dep.id, { wait: false });
      await until('the build to start', () => runtime.heldBuilds === 1);
      assert.ok(!otherPlane.calls.includes(`publish ${dep.subdomain} starting`), 'a served app is not marked starting');
      assert.match((await other.cancel(principal, dep.id)).message, /the live release keeps serving/);
      assert.equal((await build(waiting.id)).status, 'cancelled');
      assert.equal((await deployment(dep.id)).status, 'running');

      // Failed with the old release serving: a stop there is allowed, and drains where it serves.
      await upload(dep.id, 'FAIL');
      await rejectsWith(lifecycle.deploy(principal, dep.id, { wait: true }), 'build_failed');
      assert.equal((await deployment(dep.id)).status, 'failed');
      assert.equal(await served(dep.subdomain), good.id);
      assert.deepEqual(await other.stop(principal, dep.id), { message: 'deployment elsewhere stopped' });
      assert.ok(otherPlane.calls.includes(`drain ${upstream.host}:${upstream.port}`), 'the stopped release is drained');
      assert.equal((await deployment(dep.id)).status, 'stopped');

      // Stopped: nothing serves, so a build cancelled here leaves the deployment stopped.
      await upload(dep.id, 'WAIT');
      await lifecycle.deploy(principal, dep.id, { wait: false });
      await until('the build to start', () => runtime.heldBuilds === 1);
      assert.ok(dataPlane.calls.includes(`publish ${dep.subdomain} starting`));
      assert.doesNotMatch((await lifecycle.cancel(principal, dep.id)).message, /keeps serving/);
      assert.equal((await deployment(dep.id)).status, 'stopped');
    } finally {
      await other.close();
    }
  });

  test('rollback: to an earlier build; a failed or unknown build is refused', async () => {
    const dep = await newDeployment('rollback');
    await rejectsWith(lifecycle.rollback(principal, dep.id, crypto.randomUUID()), 'invalid_state', /no build to roll back to/);
    await upload(dep.id, 'FROM scratch');
    const first = await lifecycle.deploy(principal, dep.id, { wait: true });
    await upload(dep.id, 'FROM scratch');
    const second = await lifecycle.deploy(principal, dep.id, { wait: true });
    await upload(dep.id, 'FAIL');
    await rejectsWith(lifecycle.deploy(principal, dep.id, { wait: true }), 'build_failed');
    const failed = await db.selectFrom('builds').select('id').where('deployment_id', '=', dep.id).where('status', '=', 'failed').executeTakeFirstOrThrow();
    assert.equal(await served(dep.subdomain), second.id);

    assert.deepEqual(await lifecycle.rollback(principal, dep.id, first.id), { message: `rolled back to build ${first.id}` });
    await lifecycle.settle();
    assert.equal((await deployment(dep.id)).status, 'running');
    assert.equal((await deployment(dep.id)).live_build_id, first.id);
    assert.equal(await served(dep.subdomain), first.id);
    assert.equal(runtime.running(dep.id).length, 1);
    await rejectsWith(lifecycle.rollback(principal, dep.id, failed.id), 'invalid_state', /did not succeed/);
    await rejectsWith(lifecycle.rollback(principal, dep.id, crypto.randomUUID()), 'not_found', /build not found/);
    await rejectsWith(lifecycle.rollback(principal, dep.id, 'not-a-uuid'), 'not_found');
  });

  test("configuration: each build's variables are fixed at deploy; restart applies the current ones; rollback restores a build's; build arguments only for declared ARGs, never secrets; volumes mounted", async () => {
    const dep = await newDeployment('config');
    await db.updateTable('deployments').set({ volumes: JSON.stringify([{ name: 'data', mount_path: '/data' }]) }).where('id', '=', dep.id).execute();
    const set = (vars: Record<string, string>, secret = false) => configs.change(dep.id, { set: new Map(Object.entries(vars)), unset: [], secret }, () => undefined);
    const lastEnv = (): Record<string, string> => runtime.runs.at(-1)?.env ?? {};
    await set({ GREETING: 'one', DECLARED: 'd', UNDECLARED: 'u' });
    await set({ TOKEN: 'secret-token', DECLARED_SECRET: 's' }, true);
    await upload(dep.id, 'FROM scratch\nARG DECLARED DECLARED_SECRET');
    const first = await lifecycle.deploy(principal, dep.id, { wait: true });
    assert.deepEqual(runtime.builds.at(-1)?.buildArgs, { DECLARED: 'd' });
    assert.equal(lastEnv()['GREETING'], 'one');
    assert.equal(lastEnv()['TOKEN'], 'secret-token');
    assert.match(lastEnv()['PORT'] ?? '', /^\d+$/);
    const mount = runtime.runs.at(-1)?.volumes?.[0];
    assert.equal(mount?.target, '/data');
    assert.ok(runtime.volumes.has(mount?.source ?? ''), 'the volume exists on the engine, labelled');
    assert.equal(runtime.volumes.get(mount?.source ?? '')?.labels['dev.slipway.deployment'], dep.id);

    await set({ GREETING: 'two' });
    const second = await lifecycle.deploy(principal, dep.id, { wait: true });
    assert.equal(lastEnv()['GREETING'], 'two');
    await set({ GREETING: 'three' });
    await lifecycle.restart(principal, dep.id);
    assert.equal(lastEnv()['GREETING'], 'three', 'restart applies the current variables');
    assert.equal((await configs.buildConfig(second.id))?.find((v) => v.key === 'GREETING')?.value, 'three', 'and records them for the build');
    await lifecycle.rollback(principal, dep.id, first.id);
    assert.equal(lastEnv()['GREETING'], 'one', "rollback runs the build's own configuration");
    assert.equal((await configs.current(dep.id)).find((v) => v.key === 'GREETING')?.value, 'one', 'which is current again');
    assert.equal(runtime.runs.at(-1)?.volumes?.[0]?.source, mount?.source, 'the same volume in every release');
    await lifecycle.settle();
  });

  test('delete: the route is withdrawn (404), containers and images are gone, and so is the record', async () => {
    const dep = await newDeployment('delete');
    await upload(dep.id, 'FROM scratch');
    const live = await lifecycle.deploy(principal, dep.id, { wait: true });
    const image = (await build(live.id)).image_id;
    assert.ok(image !== null && runtime.images.has(image));
    await lifecycle.remove(principal, dep.id);
    assert.equal(dataPlane.answer(dep.subdomain), '404');
    assert.equal((await runtime.listContainers({ 'dev.slipway.deployment': dep.id })).length, 0);
    assert.equal(runtime.images.has(image), false);
    assert.equal(await db.selectFrom('deployments').select('id').where('id', '=', dep.id).executeTakeFirst(), undefined);
    await rejectsWith(lifecycle.stop(principal, dep.id), 'not_found');
  });

  test('delete with an engine too slow to remove the image: the deletion still succeeds, and the next start sweeps the image', async () => {
    const dep = await newDeployment('delete-slow');
    await upload(dep.id, 'FROM scratch');
    const live = await lifecycle.deploy(principal, dep.id, { wait: true });
    const image = (await build(live.id)).image_id;
    assert.ok(image !== null && runtime.images.has(image));
    const removeImage = runtime.removeImage.bind(runtime);
    runtime.removeImage = async () => {
      throw new Error('Docker engine: remove image did not finish within 180s');
    };
    try {
      await lifecycle.remove(principal, dep.id);
    } finally {
      runtime.removeImage = removeImage;
    }
    assert.equal(dataPlane.answer(dep.subdomain), '404');
    assert.equal((await runtime.listContainers({ 'dev.slipway.deployment': dep.id })).length, 0);
    assert.equal(await db.selectFrom('deployments').select('id').where('id', '=', dep.id).executeTakeFirst(), undefined);
    assert.equal(fs.existsSync(path.dirname(path.dirname(sources.sourceDir(dep.id, crypto.randomUUID())))), false, 'its sources are gone too');
    assert.equal(runtime.images.has(image), true, 'the image the engine kept');
    const plan = await planRecovery({ store: databaseDeploymentStore(db, RUNNER), engine: runtime, dataPlane, dataDir: dir, log: () => undefined, instanceId: INSTANCE }, true);
    await plan.sweep?.();
    assert.equal(runtime.images.has(image), false, 'swept at the next start');
  });

  test("another user's deployment is not found, whatever the operation", async () => {
    const dep = await newDeployment('owner');
    const stranger: Principal = { ...principal, userId: crypto.randomUUID() };
    await rejectsWith(lifecycle.deploy(stranger, dep.id, { wait: false }), 'not_found');
    await rejectsWith(lifecycle.stop(stranger, dep.id), 'not_found');
    await rejectsWith(lifecycle.remove(stranger, dep.id), 'not_found');
  });

  test('crash recovery: an interrupted build is built again, a vanished live container starts again, strays are removed', async () => {
    const dep = await newDeployment('crash');
    await upload(dep.id, 'FROM scratch');
    const live = await lifecycle.deploy(principal, dep.id, { wait: true });
    // What a crash mid-deploy leaves: a build still `building` (of the upload, recorded before builds
    // named their runner), the deployment `building`; then the engine loses the live container, and
    // a container of this installation nobody knows remains.
    const interrupted = crypto.randomUUID();
    const uploaded = await deployment(dep.id);
    await db
      .insertInto('builds')
      .values({ id: interrupted, deployment_id: dep.id, status: 'building', commit_sha: uploaded.upload_sha256 ?? '', source_ref: uploaded.upload_id ?? '', error: null, image_id: null, container_id: null, upstreams: null, started_at: new Date().toISOString(), finished_at: null })
      .execute();
    await db.updateTable('deployments').set({ status: 'building' }).where('id', '=', dep.id).execute();
    const liveContainer = (await build(live.id)).container_id;
    assert.ok(liveContainer !== null);
    await runtime.vanish(liveContainer);
    const image = (await build(live.id)).image_id ?? '';
    const stray = await runtime.runContainer({
      image,
      name: 'stray',
      labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: INSTANCE },
      env: {},
      containerPort: 8080,
      memoryBytes: 1,
      nanoCpus: 1,
      pidsLimit: 1,
      network: 'n',
    });

    const restarted = new FakeDataPlane();
    const plan = await planRecovery({ store: databaseDeploymentStore(db, RUNNER), engine: runtime, dataPlane: restarted, dataDir: dir, log: () => undefined, instanceId: INSTANCE }, true);
    assert.deepEqual(plan.interrupted, [{ buildId: interrupted, deploymentId: dep.id, runner: RUNNER }]);
    assert.equal(restarted.answer(dep.subdomain), '503', 'starting until its release is started again');
    const recovering = newLifecycle(restarted);
    await recovering.recoverReleases(plan.pending);
    await plan.sweep?.();
    assert.equal((await build(interrupted)).status, 'building', 'the interrupted build is not failed…');
    const row = await deployment(dep.id);
    assert.equal(row.status, 'building', '…nor its deployment');
    assert.equal(row.live_build_id, live.id);
    const upstream = restarted.answer(dep.subdomain);
    assert.ok(typeof upstream === 'object', 'the release that served serves again');
    const res = await fetch(`http://${upstream.host}:${upstream.port}/`, { signal: AbortSignal.timeout(5000) });
    assert.equal((await res.text()).trim(), live.id);
    assert.equal(await runtime.inspectContainer(stray.id), null, 'the stray container is removed');

    // Queued again: the same record is built from the start, and its log says why.
    await recovering.requeueInterrupted(plan.interrupted);
    const deadline = Date.now() + 10_000;
    while ((await build(interrupted)).status === 'building' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const rebuilt = await build(interrupted);
    assert.equal(rebuilt.status, 'succeeded', rebuilt.error ?? '');
    assert.equal(rebuilt.runner, RUNNER, 'a build recorded without a runner becomes this instance\'s');
    const after = await deployment(dep.id);
    assert.equal(after.status, 'running');
    assert.equal(after.live_build_id, interrupted);
    // Closed: the pipeline has written the rest of its log.
    await recovering.close();
    const log = fs.readFileSync(new BuildLogStore(dir).file(dep.id, interrupted), 'utf8');
    assert.match(log, /^==> interrupted by a restart of the server; queued again, this build starts again from the beginning\n==> build /m);
    assert.match(log, new RegExp(`==> live at build ${interrupted}\\n$`));
    assert.equal((await build(interrupted)).status, 'succeeded');
  });

  /** A deployed app whose container the test then stops behind Slipway's back; returns its ids. */
  async function deployedThenStopped(label: string): Promise<{ id: string; subdomain: string; buildId: string; containerId: string }> {
    const dep = await newDeployment(label);
    await upload(dep.id, 'FROM scratch');
    const live = await lifecycle.deploy(principal, dep.id, { wait: true });
    const containerId = (await build(live.id)).container_id;
    assert.ok(containerId !== null);
    await runtime.stopContainer(containerId);
    return { ...dep, buildId: live.id, containerId };
  }

  function plan(plane: FakeDataPlane) {
    return planRecovery({ store: databaseDeploymentStore(db, RUNNER), engine: runtime, dataPlane: plane, dataDir: dir, log: () => undefined, instanceId: INSTANCE }, true);
  }

  test('serve first: a running live container is routed at once; a stopped one answers 503 starting until it is started again', async () => {
    const up = await newDeployment('serve-up');
    await upload(up.id, 'FROM scratch');
    const upBuild = await lifecycle.deploy(principal, up.id, { wait: true });
    const down = await deployedThenStopped('serve-down');

    const restarted = new FakeDataPlane();
    const { pending } = await plan(restarted);
    const upAnswer = restarted.answer(up.subdomain);
    assert.ok(typeof upAnswer === 'object', 'the running app is live before any recovery');
    assert.equal((await (await fetch(`http://${upAnswer.host}:${upAnswer.port}/`)).text()).trim(), upBuild.id);
    assert.equal(restarted.routes.get(down.subdomain)?.state, 'starting');
    assert.deepEqual(
      pending.filter((p) => p.deploymentId === down.id),
      [{ deploymentId: down.id, subdomain: down.subdomain, buildId: down.buildId, containerId: down.containerId }],
    );
    assert.ok(!pending.some((p) => p.deploymentId === up.id));

    const recovering = newLifecycle(restarted);
    await recovering.recoverReleases(pending);
    const answer = restarted.answer(down.subdomain);
    assert.ok(typeof answer === 'object', 'live again');
    assert.equal((await (await fetch(`http://${answer.host}:${answer.port}/`)).text()).trim(), down.buildId);
    assert.ok(runtime.calls.includes(`startContainer ${down.containerId}`), 'the same container was started again (no duplicate)');
    assert.equal((await build(down.buildId)).container_id, down.containerId);
    assert.deepEqual(JSON.parse((await build(down.buildId)).upstreams ?? 'null'), [{ host: answer.host, port: answer.port }]);
    assert.equal((await deployment(down.id)).status, 'running');
    await recovering.close();
  });

  test('a stop issued during recovery wins: the release is not started again', async () => {
    const down = await deployedThenStopped('serve-stop');
    const restarted = new FakeDataPlane();
    const { pending } = await plan(restarted);
    const recovering = newLifecycle(restarted);
    const item = pending.filter((p) => p.deploymentId === down.id);
    // The stop takes the deployment's lock first; recovery then finds itself superseded.
    const recovered = recovering.recoverReleases(item);
    await recovering.stop(principal, down.id);
    await recovered;
    assert.equal(restarted.routes.get(down.subdomain)?.state, 'stopped');
    assert.equal((await deployment(down.id)).status, 'stopped');
    assert.ok(!runtime.calls.includes(`startContainer ${down.containerId}`));
    assert.equal(recovering.recoveringCount, 0);
    await recovering.close();
  });

  test('a restart issued during recovery wins: one new container serves, the stopped one is not started as well', async () => {
    const down = await deployedThenStopped('serve-restart');
    const restarted = new FakeDataPlane();
    const { pending } = await plan(restarted);
    const recovering = newLifecycle(restarted);
    const recovered = recovering.recoverReleases(pending.filter((p) => p.deploymentId === down.id));
    await recovering.restart(principal, down.id);
    await recovered;
    await recovering.settle();
    assert.ok(!runtime.calls.includes(`startContainer ${down.containerId}`), 'recovery stood down');
    const serving = runtime.running(down.id);
    assert.equal(serving.length, 1, 'one container runs');
    const answer = restarted.answer(down.subdomain);
    assert.ok(typeof answer === 'object');
    assert.equal(serving[0]?.upstream?.port, answer.port);
    assert.equal((await build(down.buildId)).container_id, serving[0]?.id);
    await recovering.close();
  });

  test('with the engine down, recovery waits for it (503 starting, nothing marked failed), then brings the app back', async () => {
    const down = await deployedThenStopped('serve-engine');
    const restarted = new FakeDataPlane();
    const { pending } = await plan(restarted);
    const recovering = newLifecycle(restarted);
    runtime.down = true;
    const recovered = recovering.recoverReleases(pending.filter((p) => p.deploymentId === down.id));
    try {
      await new Promise((resolve) => setTimeout(resolve, 700));
      assert.equal(restarted.routes.get(down.subdomain)?.state, 'starting');
      assert.equal(recovering.recoveringCount, 1);
      assert.equal((await deployment(down.id)).status, 'running', 'not failed while the engine is away');
    } finally {
      runtime.down = false;
    }
    await recovered;
    assert.ok(typeof restarted.answer(down.subdomain) === 'object');
    assert.equal(recovering.recoveringCount, 0);
    await recovering.close();
  });

  test('an app slow to answer its health check holds no engine turn: with one turn, the next app starts while it waits', async () => {
    const slow = await deployedThenStopped('serve-slow');
    const next = await deployedThenStopped('serve-next');
    const slowImage = (await build(slow.buildId)).image_id;
    assert.ok(slowImage !== null);
    const restarted = new FakeDataPlane();
    const pending = (await plan(restarted)).pending.filter((p) => p.deploymentId === slow.id || p.deploymentId === next.id);
    assert.deepEqual(pending.map((p) => p.deploymentId), [slow.id, next.id], 'the slow app is first in the queue');
    // The start-up timeout is far away: the slow app is still waiting, not failed, when the next one starts.
    const recovering = newLifecycle(restarted, { recoveryConcurrency: 1, startupTimeoutMs: 60_000 });
    runtime.images.set(slowImage, { unhealthy: false, silent: true });
    let recovered: Promise<void> | undefined;
    try {
      recovered = recovering.recoverReleases(pending);
      await until('the next app to be live', () => typeof restarted.answer(next.subdomain) === 'object');
      assert.ok(runtime.calls.includes(`startContainer ${slow.containerId}`), 'the slow app was started first');
      assert.equal(restarted.routes.get(slow.subdomain)?.state, 'starting', 'the slow app still waits for its health check');
      assert.equal(recovering.recoveringCount, 1);
    } finally {
      runtime.images.set(slowImage, { unhealthy: false });
    }
    await recovered;
    const answer = restarted.answer(slow.subdomain);
    assert.ok(typeof answer === 'object', 'the slow app is live once it answers');
    assert.equal((await build(slow.buildId)).container_id, slow.containerId, 'its own container, not a fresh one');
    assert.equal(runtime.running(slow.id).length, 1);
    assert.equal((await deployment(slow.id)).status, 'running');
    await recovering.close();
  });

  /**
   * A stopped app whose recovery has started its container and now waits for an answer that does
   * not come (its image is silent until `answer()`), with a restarted server's lifecycle.
   */
  async function recoveryWaiting(name: string, startupTimeoutMs: number) {
    const slow = await deployedThenStopped(name);
    const image = (await build(slow.buildId)).image_id;
    assert.ok(image !== null);
    const restarted = new FakeDataPlane();
    const pending = (await plan(restarted)).pending.filter((p) => p.deploymentId === slow.id);
    const recovering = newLifecycle(restarted, { startupTimeoutMs });
    const mark = runtime.calls.length;
    const letAnswer = (): void => void runtime.images.set(image, { unhealthy: false });
    runtime.images.set(image, { unhealthy: false, silent: true });
    const recovered = recovering.recoverReleases(pending);
    try {
      await until('recovery to start the container', () => runtime.calls.slice(mark).includes(`startContainer ${slow.containerId}`));
    } catch (err) {
      letAnswer();
      await recovering.close();
      throw err;
    }
    return { slow, restarted, recovering, mark, recovered, letAnswer };
  }

  test('a stop issued while recovery waits for the app to answer is not kept waiting: the app stops, no fresh container is tried', async () => {
    // Were the stop to wait for the health check, it would wait out this timeout and then a fresh container's.
    const { slow, restarted, recovering, mark, recovered, letAnswer } = await recoveryWaiting('serve-stop-waiting', 10_000);
    try {
      const stopped = await recovering.stop(principal, slow.id);
      assert.match(stopped.message, /stopped/);
      assert.equal(restarted.routes.get(slow.subdomain)?.state, 'stopped');
      assert.equal((await deployment(slow.id)).status, 'stopped');
      assert.ok(!runtime.calls.slice(mark).some((call) => call.startsWith('runContainer')), 'no fresh container was tried');
      await recovered;
      assert.equal(recovering.recoveringCount, 0);
      assert.equal(runtime.running(slow.id).length, 0, 'the container recovery started was stopped');
      assert.equal((await build(slow.buildId)).container_id, slow.containerId);
      assert.equal(restarted.routes.get(slow.subdomain)?.state, 'stopped', 'recovery did not publish it afterwards');
    } finally {
      letAnswer();
      await recovering.close();
    }
  });

  test('an operation that is refused while recovery waits leaves the entry to recovery, which brings the app back', async () => {
    const { slow, restarted, recovering, recovered, letAnswer } = await recoveryWaiting('serve-refused', 60_000);
    try {
      await rejectsWith(recovering.rollback(principal, slow.id, crypto.randomUUID()), 'not_found');
      assert.equal(recovering.recoveringCount, 1, 'the entry is still recovery\'s');
      assert.equal(restarted.routes.get(slow.subdomain)?.state, 'starting');
    } finally {
      letAnswer();
    }
    await recovered;
    const answer = restarted.answer(slow.subdomain);
    assert.ok(typeof answer === 'object', 'live again');
    assert.equal((await (await fetch(`http://${answer.host}:${answer.port}/`)).text()).trim(), slow.buildId);
    assert.equal((await build(slow.buildId)).container_id, slow.containerId, 'its own container');
    assert.equal(runtime.running(slow.id).length, 1);
    assert.equal((await deployment(slow.id)).status, 'running');
    await recovering.close();
  });

  test('recovery starts at most recoveryConcurrency containers at once, and uses that many', async () => {
    const apps = [];
    for (let i = 0; i < 5; i += 1) apps.push(await deployedThenStopped(`serve-bound-${i}`));
    const restarted = new FakeDataPlane();
    const ids = new Set(apps.map((a) => a.id));
    const pending = (await plan(restarted)).pending.filter((p) => ids.has(p.deploymentId));
    assert.equal(pending.length, 5);
    const recovering = newLifecycle(restarted, { recoveryConcurrency: 2 });
    runtime.startDelayMs = 30;
    runtime.maxStartsInFlight = 0;
    try {
      await recovering.recoverReleases(pending);
    } finally {
      runtime.startDelayMs = 0;
    }
    assert.equal(runtime.maxStartsInFlight, 2);
    for (const app of apps) {
      assert.equal(await (async () => {
        const answer = restarted.answer(app.subdomain);
        assert.ok(typeof answer === 'object', `${app.subdomain} is live`);
        return (await (await fetch(`http://${answer.host}:${answer.port}/`)).text()).trim();
      })(), app.buildId);
      assert.equal(runtime.running(app.id).length, 1, 'one container each');
    }
    await recovering.close();
  });

  test("the watcher follows the store, not its own plane: a leader that never routed the app re-routes a replica that moved", async () => {
    const dep = await newDeployment('watch-elsewhere');
    await upload(dep.id, 'FROM scratch');
    const live = await lifecycle.deploy(principal, dep.id, { wait: true });
    const containerId = (await build(live.id)).container_id;
    assert.ok(containerId !== null);
    const before = dataPlane.answer(dep.subdomain);
    assert.ok(typeof before === 'object');
    // The engine's restart policy brings the crashed container back on another port.
    await runtime.crash(containerId);
    const moved = runtime.containers.get(containerId)?.upstream;
    assert.ok(moved !== undefined && moved !== null && moved.port !== before.port);
    const leaderPlane = new FakeDataPlane();
    const leader = newLifecycle(leaderPlane);
    try {
      await leader.refreshLiveRoutes();
    } finally {
      await leader.close();
    }
    const routed = leaderPlane.answer(dep.subdomain);
    assert.ok(typeof routed === 'object', 'published live from the store');
    assert.equal(routed.port, moved.port);
    assert.deepEqual(JSON.parse((await build(live.id)).upstreams ?? '[]'), [{ host: moved.host, port: moved.port }]);
  });

  test('the watcher starts a live container that was stopped behind its back (engine restart) and re-routes it', async () => {
    const down = await deployedThenStopped('serve-watch');
    // One round of the leader's background task ('refreshing live container ports'): the restart runs behind it.
    await lifecycle.refreshLiveRoutes();
    await until('the app is live again', () => {
      const answer = dataPlane.answer(down.subdomain);
      return typeof answer === 'object' && runtime.containers.get(down.containerId)?.upstream?.port === answer.port;
    });
    assert.equal(await served(down.subdomain), down.buildId);
    assert.equal(runtime.running(down.id).length, 1, 'one container, no duplicate');
  });
});

describe('a build taken from the queue while the server stops', () => {
  test('is not started after close: close waits for the take, and the build ends as interrupted', async () => {
    // A queue whose take() is held at a gate, so that close() begins while a take is in flight.
    const inner = new LocalBuildQueue(new FairBuildSlots(2));
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    let takes = 0;
    const gated: BuildQueue = {
      enqueue: (b) => inner.enqueue(b),
      // Taken at once (as a database take commits), answered only once the gate opens.
      take: async () => {
        const taken = await inner.take();
        if (taken !== undefined) takes += 1;
        await gate;
        return taken;
      },
      release: (id) => inner.release(id),
      withdraw: (id) => inner.withdraw(id),
      onChange: (listener) => inner.onChange(listener),
      close: () => inner.close(),
    };
    const plane = new FakeDataPlane();
    const stopping = new DeploymentLifecycle({
      store: databaseDeploymentStore(db, RUNNER),
      configs,
      engine: runtime,
      dataPlane: plane,
      sources,
      buildLogs: new BuildLogStore(dir),
      log: () => undefined,
      settings: { ...settings, dataDir: dir },
      buildQueue: gated,
    });
    const dep = await newDeployment('taken-at-close');
    stopping.registered(await deployment(dep.id));
    await upload(dep.id, 'FROM scratch');
    const queued = await stopping.deploy(principal, dep.id, { wait: false });
    await until('the dispatcher to have taken the build', () => takes > 0);
    const closed = stopping.close();
    openGate();
    await closed;
    const ended = await build(queued.id);
    assert.equal(ended.status, 'cancelled', 'ended by the shutdown, not built after it');
    // Nothing runs for it afterwards: no container, and the record stays as the shutdown left it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(runtime.running(dep.id).length, 0);
    assert.equal((await build(queued.id)).status, 'cancelled');
  });
});
