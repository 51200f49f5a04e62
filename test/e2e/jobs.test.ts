// End-to-end test of scheduled jobs (decisions §22) on the real engine and SQLite: bad input, run now with its log followed, a failing exit code, a timeout, forbid, a stopped deployment.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually, testEngine } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { cli } from '../helpers/cli.js';
import { tempDir } from '../helpers/apps.js';
import type { AppEvent } from '../../src/domain/app-events.js';
import { LABEL_JOB_RUN } from '../../src/runtime/docker/one-off-run.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE } from '../../src/runtime/engine.js';
import { docker } from '../helpers/databases.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

describe('scheduled jobs', () => {
  let s: TestServer;
  let alice: User;
  let bob: User;
  let app: { id: string; subdomain: string };
  const events: AppEvent[] = [];

  before(async () => {
    s = await startTestServer();
    s.server.appEvents.onAny((event) => events.push(event));
    alice = await s.newUser('alice');
    bob = await s.newUser('bob');
    const { archive } = await busyboxArchive();
    app = await createArchiveApp(s, alice.token, archive);
  });
  after(async () => {
    await s?.close();
  });

  const jobsPath = (): string => `/api/v1/deployments/${app.id}/jobs`;
  const createJob = (body: Record<string, unknown>, token = alice.token) => s.request('POST', jobsPath(), { token, body });
  /** Runs a job now and waits for its end; resolves with the run as listed. */
  const runToEnd = async (jobId: string): Promise<Record<string, unknown>> => {
    const started = await s.request('POST', `${jobsPath()}/${jobId}/runs`, { token: alice.token });
    assert.equal(started.status, 202, started.text);
    return eventually(async () => {
      const runs = await s.request('GET', `${jobsPath()}/${jobId}/runs`, { token: alice.token });
      const run = (runs.json as Array<Record<string, unknown>>).find((r) => r.id === started.json.id);
      return run !== undefined && run.status !== 'running' ? run : undefined;
    }, 60_000, 'the run ended');
  };

  test('a job before any release (201, its run skipped saying why), bad schedule, timezone, command and timeout (400 naming the field), another user (404), every change in the audit log', async () => {
    const good = { name: 'nightly', schedule: '0 3 * * *', command: ['echo', 'hi'] };
    const early = await createJob(good);
    assert.equal(early.status, 201, early.text);
    const skipped = await runToEnd(early.json.id);
    assert.equal(skipped.status, 'skipped');
    assert.match(String(skipped.message), /release/);
    assert.equal((await s.request('PATCH', `${jobsPath()}/${early.json.id}`, { token: alice.token, body: { schedule: '@daily' } })).status, 200);
    assert.equal((await s.request('DELETE', `${jobsPath()}/${early.json.id}`, { token: alice.token })).status, 204);
    const audit = await s.request('GET', `/api/v1/audit?target_id=${early.json.id}`, { token: alice.token });
    assert.deepEqual(audit.json.map((e: { action: string }) => e.action).sort(), ['job.create', 'job.delete', 'job.run', 'job.update']);
    assert.ok(audit.json.every((e: { target_type: string; actor_id: string }) => e.target_type === 'job' && e.actor_id === alice.userId));

    await s.request('PATCH', `/api/v1/deployments/${app.id}/env`, { token: alice.token, body: { vars: { GREETING: 'from-the-app-vars' } } });
    const deployed = await deployAndWait(s, alice.token, app.id);
    assert.equal(deployed.status, 200, deployed.text);

    for (const [body, field] of [
      [{ ...good, schedule: '61 * * * *' }, 'schedule'],
      [{ ...good, schedule: '* * *' }, 'schedule'],
      [{ ...good, schedule: '@reboot' }, 'schedule'],
      [{ ...good, timezone: 'Mars/Olympus' }, 'timezone'],
      [{ ...good, command: 'echo hi' }, 'command'],
      [{ ...good, command: [] }, 'command'],
      [{ ...good, timeout_seconds: 0 }, 'timeout_seconds'],
      [{ ...good, timeout_seconds: 86_401 }, 'timeout_seconds'],
      [{ ...good, concurrency: 'sometimes' }, 'concurrency'],
      [{ ...good, service: 'not a service!' }, 'service'],
      [{ ...good, name: '  ' }, 'name'],
      [{ ...good, name: 'x'.repeat(101) }, 'name'],
      [{ ...good, name: 'two\nlines' }, 'name'],
    ] as const) {
      const res = await createJob(body);
      assertError(res, 400, 'validation_error', JSON.stringify(body));
      assert.match(res.json.message, new RegExp(`^${field}`), JSON.stringify(body));
    }
    assert.deepEqual((await s.request('GET', jobsPath(), { token: alice.token })).json, [], 'nothing was created');

    const created = await createJob({ ...good, timezone: 'Europe/Paris' });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.timeout_seconds, 3600);
    assert.equal(created.json.concurrency, 'forbid');
    assert.equal(created.json.service, null, 'no compose service named: the release image');
    assert.equal(typeof created.json.next_run_at, 'string');
    assertError(await s.request('GET', jobsPath(), { token: bob.token }), 404, 'not_found');
    assertError(await s.request('GET', `${jobsPath()}/${created.json.id}`, { token: bob.token }), 404, 'not_found');
    assertError(await s.request('POST', `${jobsPath()}/${created.json.id}/runs`, { token: bob.token }), 404, 'not_found');
    assertError(await createJob(good), 400, 'validation_error', 'the name is taken');
    // Contract §22 gives no rule for a name: free text, trimmed, case kept.
    const spaced = await createJob({ ...good, name: ' Nightly cleanup ' });
    assert.equal(spaced.status, 201, spaced.text);
    assert.equal(spaced.json.name, 'Nightly cleanup');
    assert.equal((await s.request('DELETE', `${jobsPath()}/${spaced.json.id}`, { token: alice.token })).status, 204);
    assert.equal((await s.request('DELETE', `${jobsPath()}/${created.json.id}`, { token: alice.token })).status, 204);
  });

  test("run now: the live release's image with the app's variables, its log followed to the end; a failing exit code; a timeout kills it", async () => {
    const created = await createJob({ name: 'greet', schedule: '@monthly', command: ['sh', '-c', 'echo "hello $GREETING"; sleep 1; echo second line >&2'] });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const started = await s.request('POST', `${jobsPath()}/${jobId}/runs`, { token: alice.token });
    assert.equal(started.status, 202, started.text);
    assert.equal(started.json.status, 'running');
    assert.equal(started.json.trigger, 'manual');
    const res = await fetch(`${s.url}${jobsPath()}/${jobId}/runs/${started.json.id}/logs?follow=true`, { headers: { authorization: `Bearer ${alice.token}` }, signal: AbortSignal.timeout(60_000) });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /hello from-the-app-vars\n/);
    assert.match(text, /second line\n/);
    assert.match(text, /==> the run succeeded/);
    const runs = (await s.request('GET', `${jobsPath()}/${jobId}/runs`, { token: alice.token })).json as Array<Record<string, unknown>>;
    assert.equal(runs[0]?.status, 'succeeded');
    assert.equal(runs[0]?.exit_code, 0);
    assert.equal(typeof runs[0]?.finished_at, 'string');

    assert.equal((await s.request('PATCH', `${jobsPath()}/${jobId}`, { token: alice.token, body: { command: ['sh', '-c', 'echo failing; exit 7'] } })).status, 200);
    const failed = await runToEnd(jobId);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.exit_code, 7);
    await eventually(async () => (events.some((e) => e.type === 'job.failed' && e.runId === failed.id && e.exitCode === 7) ? true : undefined), 5000, 'job.failed');

    assert.equal((await s.request('PATCH', `${jobsPath()}/${jobId}`, { token: alice.token, body: { command: ['sleep', '60'], timeout_seconds: 1 } })).status, 200);
    const slow = await runToEnd(jobId);
    assert.equal(slow.status, 'timed_out');
    assert.match(String(slow.message), /1 s/);
    assert.ok(events.some((e) => e.type === 'job.failed' && e.runId === slow.id && e.status === 'timed_out'));
    const left = await testEngine().listContainers({ [LABEL_INSTANCE]: s.server.instanceId, [LABEL_JOB_RUN]: String(slow.id) });
    assert.equal(left.length, 0, 'the killed container is removed');
  });

  test('the CLI: jobs add, ls, run --follow (its exit code the run\'s), runs, rm', async () => {
    const home = tempDir('jobs-cli');
    const run = (args: string[]) => cli(args, { home, env: { SLIPWAY_URL: s.url, SLIPWAY_API_KEY: alice.apiKey } });
    // A name with a space is one argv element all the way (no shell in between).
    const added = await run(['jobs', 'add', app.subdomain, 'cli job', '--schedule', '@daily', '--timeout', '30', '--', 'sh', '-c', 'echo from-the-cli; exit 4']);
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, /Job cli job scheduled/);
    assert.match((await run(['jobs', 'ls', app.subdomain])).stdout, /cli job\s+@daily\s+sh -c echo from-the-cli; exit 4/);
    const ran = await run(['jobs', 'run', app.subdomain, 'cli job', '--follow']);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(ran.stdout, /from-the-cli\n/);
    assert.match(ran.stderr, /failed with exit code 4/);
    assert.match((await run(['jobs', 'runs', app.subdomain, 'cli job'])).stdout, /failed\s+manual\s+4/);
    assert.match((await run(['jobs', 'logs', app.subdomain, 'cli job'])).stdout, /from-the-cli/);
    const again = await run(['jobs', 'run', app.subdomain, 'cli job']);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, new RegExp(`slipway jobs logs ${app.subdomain} 'cli job' --follow`), 'the command to copy quotes the name');
    assert.equal((await run(['jobs', 'rm', app.subdomain, 'cli job'])).code, 0);
    assert.equal((await run(['jobs', 'run', app.subdomain, 'cli job'])).code, 1, 'gone');
    fs.rmSync(home, { recursive: true, force: true });
  });

  test('forbid: a run asked while one goes is skipped; a stopped deployment runs no job (skipped, saying why)', async () => {
    const created = await createJob({ name: 'long', schedule: '@monthly', command: ['sleep', '3'] });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const first = await s.request('POST', `${jobsPath()}/${jobId}/runs`, { token: alice.token });
    assert.equal(first.json.status, 'running');
    // Its container has the app's limits (memory, CPUs, pids, capabilities), as the app's own container.
    const limitsOf = async (labels: Record<string, string>): Promise<unknown> => {
      const [c] = (await testEngine().listContainers(labels)).filter((x) => labels[LABEL_JOB_RUN] !== undefined || x.labels[LABEL_JOB_RUN] === undefined);
      if (c === undefined) return undefined;
      const h = (await docker.getContainer(c.id).inspect()).HostConfig;
      return { memory: h.Memory, cpus: h.NanoCpus, pids: h.PidsLimit, capDrop: h.CapDrop, capAdd: [...(h.CapAdd ?? [])].sort(), security: h.SecurityOpt };
    };
    const runLimits = await eventually(() => limitsOf({ [LABEL_JOB_RUN]: first.json.id }), 20_000, "the run's container");
    const appLimits = await limitsOf({ [LABEL_INSTANCE]: s.server.instanceId, [LABEL_DEPLOYMENT]: app.id });
    assert.ok(appLimits !== undefined, "the app's container");
    assert.deepEqual(runLimits, appLimits);
    assert.ok((runLimits as { memory: number }).memory > 0, 'a memory limit is set');
    const second = await s.request('POST', `${jobsPath()}/${jobId}/runs`, { token: alice.token });
    assert.equal(second.status, 202);
    assert.equal(second.json.status, 'skipped');
    assert.match(second.json.message, /still going/);
    await eventually(async () => {
      const runs = (await s.request('GET', `${jobsPath()}/${jobId}/runs`, { token: alice.token })).json as Array<Record<string, unknown>>;
      return runs.find((r) => r.id === first.json.id)?.status === 'succeeded' ? true : undefined;
    }, 60_000, 'the first run succeeded');

    assert.equal((await s.request('POST', `/api/v1/deployments/${app.id}/stop`, { token: alice.token })).status, 200);
    // Every second, by the scheduler: the stopped deployment's due times are recorded skipped.
    const every = await createJob({ name: 'every-second', schedule: '* * * * * *', command: ['true'], concurrency: 'allow' });
    assert.equal(every.status, 201, every.text);
    // The list comes a page at a time (§14), oldest first.
    const all = ((await s.request('GET', jobsPath(), { token: alice.token })).json as Array<{ name: string }>).map((j) => j.name);
    assert.ok(all.length >= 2 && all.at(-1) === 'every-second', all.join());
    const page1 = await s.request('GET', `${jobsPath()}?limit=1`, { token: alice.token });
    assert.deepEqual((page1.json as Array<{ name: string }>).map((j) => j.name), all.slice(0, 1));
    const next = /^<([^>]+)>; rel="next"$/.exec(String(page1.headers.get('link')))?.[1] ?? '';
    assert.ok(next.startsWith(`${jobsPath()}?cursor=`), String(page1.headers.get('link')));
    const rest = await s.request('GET', next.replace('limit=1', 'limit=500'), { token: alice.token });
    assert.deepEqual((rest.json as Array<{ name: string }>).map((j) => j.name), all.slice(1));
    assert.equal(rest.headers.get('link'), null);
    assertError(await s.request('GET', `${jobsPath()}?limit=501`, { token: alice.token }), 400, 'validation_error');
    const run = await eventually(async () => {
      const runs = (await s.request('GET', `${jobsPath()}/${every.json.id}/runs`, { token: alice.token })).json as Array<Record<string, unknown>>;
      return runs.find((r) => r.status !== 'running');
    }, 30_000, 'a scheduled run');
    assert.equal(run.status, 'skipped');
    assert.equal(run.trigger, 'schedule');
    assert.match(String(run.message), /stopped/);
    assert.equal((await s.request('DELETE', `${jobsPath()}/${every.json.id}`, { token: alice.token })).status, 204);
  });
});
