// Unit tests of the jobs' schedule, scheduler and names with a fake store: field-named errors, once per due time across schedulers, missed runs, forbid, orphaned runs, free-text names.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DomainError } from '../../src/core/errors.js';
import { checkTimezone, JobSchedule } from '../../src/core/cron-schedule.js';
import { JobScheduler, MAX_LATE_MS } from '../../src/jobs/job-scheduler.js';
import type { JobRow, JobStore, NewRun, RunRow } from '../../src/jobs/job-store.js';
import { JobRunner, jobImage } from '../../src/jobs/job-runner.js';
import { endOrphanedRuns } from '../../src/jobs/reconcile-runs.js';
import { RunLogWakeups } from '../../src/jobs/run-logs.js';
import { createJob, updateJob, type JobsContext } from '../../src/jobs/jobs.js';
import type { DeploymentCatalog } from '../../src/domain/deployment-catalog.js';
import type { Principal } from '../../src/core/principal.js';

const T0 = Date.parse('2026-11-28T10:00:00.000Z');
const at = (ms: number): Date => new Date(T0 + ms);
const quiet = (): void => undefined;

const job = (overrides: Partial<JobRow> = {}): JobRow => ({
  id: 'job-1', deployment_id: 'dep-1', name: 'tick', schedule: '*/2 * * * * *', command: ['true'], timezone: 'UTC',
  timeout_seconds: 60, concurrency: 'allow', created_at: at(0).toISOString(), updated_at: at(0).toISOString(), ...overrides,
});

/** The part of the job store the scheduler and runner use, in memory, with the unique (job, due time) of the real one. */
class FakeStore {
  jobs: JobRow[] = [];
  runs: RunRow[] = [];
  async allJobs(): Promise<JobRow[]> {
    return this.jobs;
  }
  async lastDueAt(jobId: string): Promise<string | undefined> {
    return this.runs.filter((r) => r.job_id === jobId && r.due_at !== null).map((r) => r.due_at as string).sort().at(-1);
  }
  async claimRun(run: NewRun): Promise<boolean> {
    if (run.due_at !== null && this.runs.some((r) => r.job_id === run.job_id && r.due_at === run.due_at)) return false;
    this.runs.push({ ...run, exit_code: null, container_id: null, finished_at: null });
    return true;
  }
  async startedCount(jobId: string, except: string): Promise<number> {
    return this.runs.filter((r) => r.job_id === jobId && r.id !== except && r.status === 'running' && r.container_id !== null).length;
  }
  async runningCount(jobId: string): Promise<number> {
    return this.runs.filter((r) => r.job_id === jobId && r.status === 'running').length;
  }
  async pruneRuns(): Promise<void> {}
  async runningRuns(): Promise<RunRow[]> {
    return this.runs.filter((r) => r.status === 'running');
  }
  async finishRun(runId: string, end: Pick<RunRow, 'status' | 'exit_code' | 'message' | 'finished_at'>): Promise<void> {
    this.runs = this.runs.map((r) => (r.id === runId && r.status === 'running' ? { ...r, ...end } : r));
  }
}

describe('job schedules', () => {
  test("a job's image: its compose service's in the live release (contract §22), else the release's; a service the release lacks is an error naming the ones it has", () => {
    const service = (name: string, image: string) => ({ name, image, environment: {}, dependsOn: [], replicas: 1, ports: [], volumes: [] });
    const set = JSON.stringify({ web: 'web', port: 8080, services: [service('web', 'img-web'), service('worker', 'img-worker')] });
    assert.equal(jobImage({ service: null }, { image_id: 'img-web', release_set: set }), 'img-web');
    assert.equal(jobImage({}, { image_id: 'plain', release_set: null }), 'plain');
    assert.equal(jobImage({ service: 'worker' }, { image_id: 'img-web', release_set: set }), 'img-worker');
    const missing = jobImage({ service: 'cron' }, { image_id: 'img-web', release_set: set });
    assert.ok(typeof missing !== 'string' && /no service "cron".*web, worker/.test(missing.error));
    const single = jobImage({ service: 'worker' }, { image_id: 'plain', release_set: null });
    assert.ok(typeof single !== 'string' && /not a compose release/.test(single.error));
  });

  test('5 and 6 fields and the four nicknames read; anything else is a 400 naming schedule', () => {
    assert.equal(JobSchedule.parse('0 3 * * *', 'UTC').next(at(0))?.toISOString(), '2026-11-29T03:00:00.000Z');
    assert.equal(JobSchedule.parse('*/2 * * * * *', 'UTC').next(at(0))?.toISOString(), '2026-11-28T10:00:02.000Z');
    assert.equal(JobSchedule.parse('@hourly', 'Asia/Kolkata').next(at(0))?.toISOString(), '2026-11-28T10:30:00.000Z', 'read in its time zone (+05:30)');
    assert.equal(JobSchedule.parse('0 3 * * *', 'Europe/Paris').next(at(0))?.toISOString(), '2026-11-29T02:00:00.000Z');
    for (const nickname of ['@daily', '@weekly', '@monthly']) assert.ok(JobSchedule.parse(nickname, 'UTC').next(at(0)) !== null);
    for (const bad of ['', '* * * *', '* * * * * * *', '61 * * * *', '@reboot', '@yearly', '0 0 30 2 *', 'every day']) {
      assert.throws(() => JobSchedule.parse(bad, 'UTC'), (err: unknown) => err instanceof DomainError && err.code === 'validation_error' && err.message.startsWith('schedule:'), bad);
    }
    assert.equal(checkTimezone('America/Argentina/Buenos_Aires'), 'America/Argentina/Buenos_Aires');
    for (const bad of ['Mars/Olympus', '+01:00', 'UTC; rm', '']) assert.throws(() => checkTimezone(bad), /^DomainError: timezone:|timezone:/, bad);
  });

  test('latestIn: the last due time of a window, none when the window holds none', () => {
    const s = JobSchedule.parse('*/2 * * * * *', 'UTC');
    assert.equal(s.latestIn(at(0), at(7_000))?.toISOString(), at(6_000).toISOString());
    assert.equal(s.latestIn(at(0), at(1_999)), null);
    assert.equal(s.latestIn(at(0), at(2_000))?.toISOString(), at(2_000).toISOString(), 'the end is inside');
  });
});

describe('the job scheduler', () => {
  test('two schedulers on one store run each due time exactly once', async () => {
    const store = new FakeStore();
    store.jobs = [job()];
    const started: Array<{ by: string; due: string }> = [];
    const scheduler = (by: string): JobScheduler =>
      new JobScheduler({ store, log: quiet, start: async (j, due) => (await store.claimRun({ id: `${by}-${due.toISOString()}`, job_id: j.id, deployment_id: j.deployment_id, status: 'running', trigger: 'schedule', due_at: due.toISOString(), message: null, instance: by, started_at: due.toISOString() })) && started.push({ by, due: due.toISOString() }) });
    const a = scheduler('a');
    const b = scheduler('b');
    await a.refresh(at(0));
    await b.refresh(at(0));
    // Each wakes at slightly different moments around each due time, over 40 due times.
    for (let ms = 0, round = 0; ms <= 80_000; ms += 500, round++) {
      const [first, second] = round % 3 === 0 ? [b, a] : [a, b];
      await first.tick(at(ms));
      await second.tick(at(ms + 130));
    }
    const dues = started.map((s) => s.due);
    assert.equal(new Set(dues).size, dues.length, 'no due time twice');
    assert.equal(dues.length, 40, 'every due time once (2 s … 80 s)');
    assert.ok(started.some((s) => s.by === 'a') && started.some((s) => s.by === 'b'), 'both instances take some');
    assert.equal(a.nextDue()?.toISOString(), at(82_000).toISOString());
  });

  test('a late round (a busy event loop) still runs every due time it passed; a due time within the lead is claimed ahead', async () => {
    const store = new FakeStore();
    store.jobs = [job({ schedule: '* * * * * *' })];
    const due: number[] = [];
    const s = new JobScheduler({ store, log: quiet, start: async (_j, d) => due.push(d.getTime() - T0) });
    await s.refresh(at(0));
    await s.tick(at(500));
    assert.deepEqual(due, [1000, 2000], 'within the 1.5 s lead');
    await s.tick(at(5500));
    assert.deepEqual(due, [1000, 2000, 3000, 4000, 5000, 6000, 7000]);
  });

  test('at start, the latest due time missed less than an hour ago runs once; older ones, none; a new job runs nothing from before it existed', async () => {
    const store = new FakeStore();
    store.jobs = [job({ id: 'hourly', schedule: '0 * * * *', created_at: at(-5 * 3_600_000).toISOString(), updated_at: at(-5 * 3_600_000).toISOString() })];
    store.runs.push({ id: 'old', job_id: 'hourly', deployment_id: 'dep-1', status: 'succeeded', trigger: 'schedule', due_at: at(-3 * 3_600_000).toISOString(), exit_code: 0, message: null, instance: 'x', container_id: null, started_at: at(-3 * 3_600_000).toISOString(), finished_at: null });
    const due: string[] = [];
    const s = new JobScheduler({ store, log: quiet, start: async (_j, d) => due.push(d.toISOString()) });
    const now = at(40 * 60_000); // 10:40: 10:00 was missed 40 min ago (and 08:00, 09:00 over an hour ago)
    await s.refresh(now);
    await s.tick(now);
    await s.tick(at(41 * 60_000));
    assert.deepEqual(due, [at(0).toISOString()]);

    const late = new JobScheduler({ store, log: quiet, start: async (_j, d) => due.push(d.toISOString()) });
    await late.refresh(at(MAX_LATE_MS));
    await late.tick(at(MAX_LATE_MS));
    assert.deepEqual(due, [at(0).toISOString(), at(MAX_LATE_MS).toISOString()], 'an instance starting at 11:00 runs 11:00 (10:00 is an hour late)');

    const fresh = new FakeStore();
    fresh.jobs = [job({ id: 'new', schedule: '0 * * * *', created_at: at(30 * 60_000).toISOString(), updated_at: at(30 * 60_000).toISOString() })];
    const none: string[] = [];
    const s2 = new JobScheduler({ store: fresh, log: quiet, start: async (_j, d) => none.push(d.toISOString()) });
    await s2.refresh(at(40 * 60_000));
    await s2.tick(at(40 * 60_000));
    assert.deepEqual(none, []);
  });

  test('forbid: a due time while a run goes is recorded skipped; orphaned runs are ended, their containers removed', async () => {
    const store = new FakeStore();
    const forbid = job({ concurrency: 'forbid' });
    let release: () => void = () => undefined;
    const removed: string[] = [];
    const runner = new JobRunner({
      store: store as unknown as JobStore,
      deployments: {
        deployment: async () => ({ id: 'dep-1', subdomain: 'app', status: 'running', live_build_id: 'b1', health_check_path: null, memory_bytes: null, nano_cpus: null, volumes: '[]', replicas: 1 }) as never,
        build: async () => ({ id: 'b1', image_id: 'img' }) as never,
      },
      configs: { buildConfig: async () => [], current: async () => [] },
      runtime: {
        runOnce: async (_target, options) => {
          if (options.ready !== undefined && !(await options.ready())) return { id: 'c2', exitCode: null, timedOut: false, started: false };
          options.onStarted?.('c1');
          await new Promise<void>((resolve) => (release = resolve));
          return { id: 'c1', exitCode: 0, timedOut: false, started: true };
        },
      },
      settings: { instanceId: 'i', defaultMemoryBytes: 1, defaultNanoCpus: 1, appPidsLimit: 1 },
      self: 'me',
      events: { emit: () => undefined },
      wakeups: new RunLogWakeups(),
      log: quiet,
    });
    (store as unknown as { appendLog: () => Promise<void>; setRunContainer: () => Promise<void> }).appendLog = async () => undefined;
    (store as unknown as { setRunContainer: (runId: string, id: string) => Promise<void> }).setRunContainer = async (runId, id) => {
      store.runs = store.runs.map((r) => (r.id === runId ? { ...r, container_id: id } : r));
    };
    const first = await runner.start(forbid, 'schedule', at(2000));
    const second = await runner.start(forbid, 'schedule', at(4000));
    assert.equal(first?.status, 'running');
    assert.equal(second?.status, 'skipped');
    assert.match(String(second?.message), /still going/);
    assert.equal(await runner.start(forbid, 'schedule', at(4000)), null, 'a due time claimed already is not run again');
    await new Promise((r) => setTimeout(r, 10));
    // A due time still to come is claimed ahead and prepared; forbid is checked at its start, when the first run still goes.
    const ahead = await runner.start(forbid, 'schedule', new Date(Date.now() + 30));
    assert.equal(ahead?.status, 'running', 'claimed ahead');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(store.runs.find((r) => r.id === ahead?.id)?.status, 'skipped');
    release();
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(store.runs.find((r) => r.id === first?.id)?.status, 'succeeded');

    store.runs.push(
      { ...(first as RunRow), id: 'dead', status: 'running', instance: 'gone', container_id: 'c-dead' },
      { ...(first as RunRow), id: 'alive', status: 'running', instance: 'other', container_id: 'c-alive' },
      { ...(first as RunRow), id: 'mine', status: 'running', instance: 'me', container_id: 'c-mine' },
    );
    const runtime = { removeRelease: async (id: string) => void removed.push(id) };
    assert.equal(await endOrphanedRuns({ store, runtime, self: 'me', live: new Set(['me', 'other']), atStart: false }), 1);
    assert.deepEqual(removed, ['c-dead']);
    assert.equal(await endOrphanedRuns({ store, runtime, self: 'me', live: new Set(['me', 'other']), atStart: true }), 1, 'at start, this instance has no run going');
    assert.deepEqual(removed, ['c-dead', 'c-mine']);
    assert.equal(store.runs.find((r) => r.id === 'alive')?.status, 'running');
    assert.match(String(store.runs.find((r) => r.id === 'dead')?.message), /instance/);
  });
});

describe('job names', () => {
  const owner: Principal = { userId: 'user-1', isAdmin: false, via: 'session', sessionId: 'session-1', apiKeyId: undefined };
  const deploymentId = '8a0c8f4e-4d0b-4a55-9d43-0d2c6a1b7e01';
  /** The jobs' use-cases on one deployment of `owner`, the store's unique (deployment, name) in memory. */
  const context = (): { ctx: JobsContext; jobs: JobRow[] } => {
    const jobs: JobRow[] = [];
    const taken = (name: string, except?: string): boolean => jobs.some((j) => j.name === name && j.id !== except);
    const store = {
      create: async (j: JobRow) => (taken(j.name) ? 'name_taken' : (jobs.push(j), 'created')),
      job: async (_dep: string, id: string) => jobs.find((j) => j.id === id),
      update: async (id: string, changes: Partial<JobRow>) => {
        if (changes.name !== undefined && taken(changes.name, id)) return 'name_taken';
        Object.assign(jobs.find((j) => j.id === id)!, changes);
        return 'updated';
      },
    } as unknown as JobStore;
    const deployments = { deployment: async (id: string) => (id === deploymentId ? { id, user_id: owner.userId, team_id: null, parent_id: null } : undefined) } as unknown as DeploymentCatalog;
    return { ctx: { store, deployments, runner: { start: async () => null }, scheduler: { changed: quiet }, wakeups: new RunLogWakeups(), unsupported: undefined }, jobs };
  };
  const body = (name: unknown) => ({ name, schedule: '@daily', command: ['true'] });
  const refusedName = (err: unknown): boolean => err instanceof DomainError && err.code === 'validation_error' && err.message.startsWith('name:');

  test('any text of 1 to 100 characters after trimming, spaces and case kept (contract §22 gives no rule); empty, too long or with control characters is a 400 naming name', async () => {
    const { ctx, jobs } = context();
    assert.equal((await createJob(ctx, owner, deploymentId, body('  nightly cleanup '))).name, 'nightly cleanup');
    assert.equal((await createJob(ctx, owner, deploymentId, body('Rapport (lundi) — été'))).name, 'Rapport (lundi) — été');
    assert.equal((await createJob(ctx, owner, deploymentId, body('x'.repeat(100)))).name, 'x'.repeat(100));
    for (const bad of ['', '   ', 'x'.repeat(101), 'two\nlines', 'tab\there', 'nul\u0000', 'del\u007f', 42, null]) {
      await assert.rejects(createJob(ctx, owner, deploymentId, body(bad)), refusedName, JSON.stringify(bad));
    }
    await assert.rejects(createJob(ctx, owner, deploymentId, body('nightly cleanup')), (err: unknown) => refusedName(err) && /already has a job named "nightly cleanup"/.test((err as Error).message), 'still unique in the deployment');
    const first = jobs[0]!;
    assert.equal((await updateJob(ctx, owner, deploymentId, first.id, { name: 'Nightly Cleanup ' })).name, 'Nightly Cleanup');
    await assert.rejects(updateJob(ctx, owner, deploymentId, first.id, { name: 'bad\rname' }), refusedName);
    assert.equal(jobs.length, 3, 'nothing created by a refusal');
  });
});
