// The job store port (decisions §22): jobs, their runs (one row per due time, claimed once across instances) and the runs' logs.
import type { AuditRecord } from '../domain/audit.js';

export type JobConcurrency = 'forbid' | 'allow';
export type RunStatus = 'running' | 'succeeded' | 'failed' | 'timed_out' | 'skipped';
export type RunTrigger = 'schedule' | 'manual';

/** A job as stored; `command` is its argv. */
export interface JobRow {
  readonly id: string;
  readonly deployment_id: string;
  readonly name: string;
  readonly schedule: string;
  readonly command: readonly string[];
  readonly timezone: string;
  readonly timeout_seconds: number;
  readonly concurrency: JobConcurrency;
  /** The compose service whose image it runs in (null or absent: the web service's, or the only image). */
  readonly service?: string | null;
  readonly created_at: string;
  /** When its schedule last changed (due times before it are never run late). */
  readonly updated_at: string;
}

export type JobChanges = Partial<Pick<JobRow, 'name' | 'schedule' | 'command' | 'timezone' | 'timeout_seconds' | 'concurrency' | 'service'>>;

export interface RunRow {
  readonly id: string;
  readonly job_id: string;
  readonly deployment_id: string;
  readonly status: RunStatus;
  readonly trigger: RunTrigger;
  /** The due time it ran for (ISO 8601); null for a manual run. */
  readonly due_at: string | null;
  readonly exit_code: number | null;
  /** Why it was skipped or failed without an exit code. */
  readonly message: string | null;
  /** The control-plane instance that runs (ran) it. */
  readonly instance: string | null;
  /** The runtime's id of its container while it runs. */
  readonly container_id: string | null;
  readonly started_at: string;
  readonly finished_at: string | null;
}

export type NewRun = Pick<RunRow, 'id' | 'job_id' | 'deployment_id' | 'status' | 'trigger' | 'due_at' | 'message' | 'instance' | 'started_at'>;

export interface JobStore {
  /** 'name_taken' when the deployment has a job of that name. With `audit`, its entry is appended in the same transaction (as for update and remove). */
  create(job: JobRow, audit?: AuditRecord): Promise<'created' | 'name_taken'>;
  job(deploymentId: string, jobId: string): Promise<JobRow | undefined>;
  jobs(deploymentId: string): Promise<JobRow[]>;
  /** Every job of every deployment (the scheduler's view). */
  allJobs(): Promise<JobRow[]>;
  update(jobId: string, changes: JobChanges, updatedAt: string, audit?: AuditRecord): Promise<'updated' | 'name_taken'>;
  /** Removes the job with its runs and their logs. */
  remove(jobId: string, audit?: AuditRecord): Promise<void>;
  /**
   * Records a run. A scheduled run's `(job_id, due_at)` is unique across instances: false when
   * another instance recorded that due time first (the caller then does nothing). With `audit` (a
   * run someone started), its entry is appended in the same transaction.
   */
  claimRun(run: NewRun, audit?: AuditRecord): Promise<boolean>;
  /** How many runs of the job are `running`. */
  runningCount(jobId: string): Promise<number>;
  /** How many runs of the job other than `runId` are `running` with their container started. */
  startedCount(jobId: string, exceptRunId: string): Promise<number>;
  /** The latest due time recorded for the job (any outcome). */
  lastDueAt(jobId: string): Promise<string | undefined>;
  setRunContainer(runId: string, containerId: string): Promise<void>;
  /** Ends a `running` run (a run already ended is left as it is). */
  finishRun(runId: string, end: { status: Exclude<RunStatus, 'running'>; exit_code: number | null; message: string | null; finished_at: string }): Promise<void>;
  /** The job's runs, newest first. */
  runs(jobId: string, limit: number): Promise<RunRow[]>;
  run(jobId: string, runId: string): Promise<RunRow | undefined>;
  runStatus(runId: string): Promise<RunStatus | undefined>;
  /** Deletes the job's oldest ended runs (and their logs) beyond the newest `keep`. */
  pruneRuns(jobId: string, keep: number): Promise<void>;
  /** Every run still `running`, whichever instance runs it. */
  runningRuns(): Promise<RunRow[]>;
  /** Appends a piece of a run's log (`final` when it is the last). */
  appendLog(runId: string, data: Buffer, final: boolean): Promise<void>;
  /** Pieces of a run's log after `afterId`, in order. */
  readLog(runId: string, afterId: number, limit: number): Promise<Array<{ id: number; data: Buffer; final: boolean }>>;
}
