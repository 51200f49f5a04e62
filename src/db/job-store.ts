// The job store on the database: `jobs`, `job_runs` (a unique (job, due time) claims a scheduled run once across instances) and `job_run_logs`.
import type { JobRow, JobStore, RunRow } from '../jobs/job-store.js';
import { isUniqueViolation, type Db } from './database.js';
import { appendRecord } from './audit-log.js';

const JOB_COLUMNS = ['id', 'deployment_id', 'name', 'schedule', 'command', 'timezone', 'timeout_seconds', 'concurrency', 'service', 'created_at', 'updated_at'] as const;
const RUN_COLUMNS = ['id', 'job_id', 'deployment_id', 'status', 'trigger', 'due_at', 'exit_code', 'message', 'instance', 'container_id', 'started_at', 'finished_at'] as const;

type StoredJob = Omit<JobRow, 'command'> & { command: string };

const toJob = (row: StoredJob): JobRow => ({ ...row, timeout_seconds: Number(row.timeout_seconds), command: JSON.parse(row.command) as string[] });
const toRun = (row: RunRow): RunRow => ({ ...row, exit_code: row.exit_code === null ? null : Number(row.exit_code) });

/** JobStore over `db` (SQLite or PostgreSQL). */
export function databaseJobStore(db: Db): JobStore {
  const jobs = () => db.selectFrom('jobs').select([...JOB_COLUMNS]);
  const runs = () => db.selectFrom('job_runs').select([...RUN_COLUMNS]);
  return {
    async create(job, audit) {
      try {
        await db.transaction().execute(async (trx) => {
          await trx.insertInto('jobs').values({ ...job, command: JSON.stringify(job.command) }).execute();
          await appendRecord(trx, audit);
        });
        return 'created';
      } catch (err) {
        if (isUniqueViolation(err)) return 'name_taken';
        throw err;
      }
    },
    async job(deploymentId, jobId) {
      const row = await jobs().where('deployment_id', '=', deploymentId).where('id', '=', jobId).executeTakeFirst();
      return row === undefined ? undefined : toJob(row);
    },
    async jobs(deploymentId) {
      return (await jobs().where('deployment_id', '=', deploymentId).orderBy('created_at').orderBy('name').execute()).map(toJob);
    },
    async allJobs() {
      return (await jobs().execute()).map(toJob);
    },
    async update(jobId, changes, updatedAt, audit) {
      const { command, ...rest } = changes;
      try {
        await db.transaction().execute(async (trx) => {
          await trx
            .updateTable('jobs')
            .set({ ...rest, ...(command === undefined ? {} : { command: JSON.stringify(command) }), updated_at: updatedAt })
            .where('id', '=', jobId)
            .execute();
          await appendRecord(trx, audit);
        });
        return 'updated';
      } catch (err) {
        if (isUniqueViolation(err)) return 'name_taken';
        throw err;
      }
    },
    async remove(jobId, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('jobs').where('id', '=', jobId).execute();
        await appendRecord(trx, audit);
      });
    },
    async claimRun(run, audit) {
      try {
        await db.transaction().execute(async (trx) => {
          await trx.insertInto('job_runs').values({ ...run, exit_code: null, container_id: null, finished_at: null }).execute();
          await appendRecord(trx, audit);
        });
        return true;
      } catch (err) {
        if (isUniqueViolation(err)) return false;
        throw err;
      }
    },
    async runningCount(jobId) {
      const row = await db.selectFrom('job_runs').select((eb) => eb.fn.countAll<number>().as('n')).where('job_id', '=', jobId).where('status', '=', 'running').executeTakeFirst();
      return Number(row?.n ?? 0);
    },
    async startedCount(jobId, exceptRunId) {
      const row = await db
        .selectFrom('job_runs')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('job_id', '=', jobId)
        .where('status', '=', 'running')
        .where('container_id', 'is not', null)
        .where('id', '!=', exceptRunId)
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    },
    async lastDueAt(jobId) {
      const row = await db.selectFrom('job_runs').select((eb) => eb.fn.max('due_at').as('due')).where('job_id', '=', jobId).executeTakeFirst();
      return row?.due ?? undefined;
    },
    async setRunContainer(runId, containerId) {
      await db.updateTable('job_runs').set({ container_id: containerId }).where('id', '=', runId).execute();
    },
    async finishRun(runId, end) {
      await db.updateTable('job_runs').set(end).where('id', '=', runId).where('status', '=', 'running').execute();
    },
    async runs(jobId, limit) {
      return (await runs().where('job_id', '=', jobId).orderBy('seq', 'desc').limit(limit).execute()).map(toRun);
    },
    async run(jobId, runId) {
      const row = await runs().where('job_id', '=', jobId).where('id', '=', runId).executeTakeFirst();
      return row === undefined ? undefined : toRun(row);
    },
    async runStatus(runId) {
      return (await db.selectFrom('job_runs').select('status').where('id', '=', runId).executeTakeFirst())?.status;
    },
    async pruneRuns(jobId, keep) {
      const kept = await db.selectFrom('job_runs').select('seq').where('job_id', '=', jobId).orderBy('seq', 'desc').offset(keep - 1).limit(1).executeTakeFirst();
      if (kept === undefined) return;
      // Logs go with their runs (foreign key, on delete cascade).
      await db.deleteFrom('job_runs').where('job_id', '=', jobId).where('seq', '<', kept.seq).where('status', '!=', 'running').execute();
    },
    async runningRuns() {
      return (await runs().where('status', '=', 'running').execute()).map(toRun);
    },
    async appendLog(runId, data, final) {
      await db.insertInto('job_run_logs').values({ run_id: runId, data, final: final ? 1 : 0 }).execute();
    },
    async readLog(runId, afterId, limit) {
      const rows = await db.selectFrom('job_run_logs').select(['id', 'data', 'final']).where('run_id', '=', runId).where('id', '>', afterId).orderBy('id').limit(limit).execute();
      return rows.map((r) => ({ id: Number(r.id), data: Buffer.from(r.data), final: r.final === 1 }));
    },
  };
}
