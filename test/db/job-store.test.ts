// The job store on SQLite and PostgreSQL: a due time claimed once, and the last 100 runs kept per job (older ended runs go with their logs; a run still going stays).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Db } from '../../src/db/database.js';
import { databaseJobStore } from '../../src/db/job-store.js';
import { RUNS_KEPT } from '../../src/jobs/job-runner.js';
import type { JobRow, JobStore, NewRun } from '../../src/jobs/job-store.js';
import { openTestDatabase } from '../helpers/server.js';

const USER = crypto.randomUUID();

describe('job store', () => {
  let db: Db;
  let close: () => Promise<void>;
  let store: JobStore;
  let job: JobRow;

  before(async () => {
    ({ db, close } = await openTestDatabase('job-store', [USER]));
    store = databaseJobStore(db);
    const deploymentId = crypto.randomUUID();
    const now = new Date().toISOString();
    await db
      .insertInto('deployments')
      .values({ id: deploymentId, user_id: USER, name: deploymentId, subdomain: `j${deploymentId.slice(0, 8)}`, source_type: 'archive', dockerfile_path: 'Dockerfile', status: 'pending', upload_id: null, upload_size: null, upload_sha256: null, live_build_id: null, health_check_path: null, memory_bytes: null, nano_cpus: null, team_id: null, repo_url: null, branch: null, created_at: now, updated_at: now })
      .execute();
    job = { id: crypto.randomUUID(), deployment_id: deploymentId, name: 'nightly', schedule: '* * * * * *', command: ['true'], timezone: 'UTC', timeout_seconds: 60, concurrency: 'allow', created_at: now, updated_at: now };
    assert.equal(await store.create(job), 'created');
  });
  after(async () => {
    await close?.();
  });

  const newRun = (dueAt: string | null): NewRun => ({
    id: crypto.randomUUID(), job_id: job.id, deployment_id: job.deployment_id, status: 'running', trigger: dueAt === null ? 'manual' : 'schedule', due_at: dueAt, message: null, instance: 'i1', started_at: new Date().toISOString(),
  });

  test('a due time is claimed once, whoever asks second', async () => {
    const due = '2026-11-29T03:00:00.000Z';
    const first = newRun(due);
    assert.equal(await store.claimRun(first), true);
    assert.equal(await store.claimRun(newRun(due)), false);
    assert.equal(await store.lastDueAt(job.id), due);
    await store.finishRun(first.id, { status: 'succeeded', exit_code: 0, message: null, finished_at: new Date().toISOString() });
  });

  test(`the newest ${RUNS_KEPT} runs are kept; older ended ones go with their logs, one still going stays`, async () => {
    const going = newRun(null);
    await store.claimRun(going);
    const ended: string[] = [];
    for (let i = 0; i < RUNS_KEPT + 3; i += 1) {
      const run = newRun(null);
      await store.claimRun(run);
      await store.appendLog(run.id, Buffer.from(`run ${i}\n`), true);
      await store.finishRun(run.id, { status: 'succeeded', exit_code: 0, message: null, finished_at: new Date().toISOString() });
      ended.push(run.id);
    }
    await store.pruneRuns(job.id, RUNS_KEPT);
    const left = (await store.runs(job.id, 500)).map((r) => r.id);
    assert.deepEqual(left, [...ended.slice(-RUNS_KEPT).reverse(), going.id], 'the newest, and the run still going');
    assert.deepEqual(await store.readLog(ended[0]!, 0, 10), [], "a pruned run's log is gone");
    assert.equal((await store.readLog(ended.at(-1)!, 0, 10))[0]?.data.toString(), `run ${RUNS_KEPT + 2}\n`);
  });
});
