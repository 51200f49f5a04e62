// Running a job once (decisions §22): the run claimed, then one container of the live release's image through the runtime port, its end recorded.
import crypto from 'node:crypto';
import type { Log } from '../core/log.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { AppEvent } from '../domain/app-events.js';
import type { AuditRecord } from '../domain/audit.js';
import type { DeploymentCatalog } from '../domain/deployment-catalog.js';
import { addedSecretVars, type AppRuntime } from '../runtime/app-runtime.js';
import { releaseTarget, type ReleaseSettings } from '../runtime/release.js';
import { parseReleaseSet } from '../runtime/release-set.js';
import { redactorFor } from '../secrets/redact.js';
import type { JobRow, JobStore, NewRun, RunRow, RunStatus, RunTrigger } from './job-store.js';
import { runLogWriter, type RunLogWakeups } from './run-logs.js';

/** Runs kept per job (decisions §22): older ended ones are deleted with their logs. */
export const RUNS_KEPT = 100;

export interface JobRunnerDeps {
  readonly store: JobStore;
  readonly deployments: Pick<DeploymentCatalog, 'deployment' | 'build'>;
  readonly configs: Pick<AppConfigStore, 'buildConfig' | 'current'>;
  readonly runtime: Pick<AppRuntime, 'runOnce' | 'addedSecrets'>;
  readonly settings: ReleaseSettings;
  /** This control-plane instance (recorded on its runs). */
  readonly self: string;
  readonly events: { emit(event: AppEvent): void };
  readonly wakeups: RunLogWakeups;
  readonly log: Log;
  readonly now?: () => Date;
}

type Ending = { status: Exclude<RunStatus, 'running'>; exit_code: number | null; message: string | null };

/** Starts runs and keeps those in flight on this instance (aborted at shutdown). */
export class JobRunner {
  readonly #deps: JobRunnerDeps;
  readonly #controller = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();

  constructor(deps: JobRunnerDeps) {
    this.#deps = deps;
  }

  /**
   * Claims a run of `job` (for `dueAt`, once across instances) and starts it in the background.
   * Resolves with the run as recorded, or null when another instance had claimed that due time.
   * With `forbid` and a run going, the run is recorded `skipped`, saying why.
   */
  async start(job: JobRow, trigger: RunTrigger, dueAt: Date | null, audit?: AuditRecord): Promise<RunRow | null> {
    const { store } = this.#deps;
    const now = this.#deps.now?.() ?? new Date();
    // A due time still to come (the scheduler claims a moment ahead): prepared now, started at it; forbid is checked then.
    const ahead = dueAt !== null && dueAt.getTime() > now.getTime();
    const startedAt = (ahead ? dueAt : now).toISOString();
    const busy = !ahead && job.concurrency === 'forbid' && (await store.runningCount(job.id)) > 0;
    const run: NewRun = {
      id: crypto.randomUUID(),
      job_id: job.id,
      deployment_id: job.deployment_id,
      status: busy ? 'skipped' : 'running',
      trigger,
      due_at: dueAt?.toISOString() ?? null,
      message: busy ? STILL_GOING : null,
      instance: this.#deps.self,
      started_at: startedAt,
    };
    if (!(await store.claimRun(run, audit))) return null;
    const row: RunRow = { ...run, exit_code: null, container_id: null, finished_at: busy ? startedAt : null };
    if (busy) {
      await store.pruneRuns(job.id, RUNS_KEPT);
      return row;
    }
    const running = this.#execute(job, row, ahead ? dueAt : null).catch((err: unknown) => this.#deps.log('warn', `job run ${row.id.slice(0, 8)} could not be recorded`, { err }));
    this.#inFlight.add(running);
    void running.finally(() => this.#inFlight.delete(running));
    return row;
  }

  /** How many runs this instance has going. */
  get running(): number {
    return this.#inFlight.size;
  }

  /** Kills the runs in flight (their containers removed; recorded failed) and waits for them. */
  async close(): Promise<void> {
    this.#controller.abort(new Error('the server stopped during the run'));
    await Promise.all([...this.#inFlight]);
  }

  async #execute(job: JobRow, run: RunRow, startAt: Date | null): Promise<void> {
    const { store, deployments, configs, runtime } = this.#deps;
    const signal = this.#controller.signal;
    const writer = runLogWriter(store, run.id, this.#deps.wakeups, (msg, detail) => this.#deps.log('warn', msg, detail));
    let ending: Ending;
    let subdomain: string | undefined;
    let image: string | { error: string };
    try {
      const dep = await deployments.deployment(job.deployment_id);
      subdomain = dep?.subdomain;
      const build = dep?.live_build_id == null ? undefined : await deployments.build(dep.id, dep.live_build_id);
      if (dep === undefined) ending = skipped('the deployment is gone');
      else if (dep.status === 'stopped') ending = skipped('the deployment is stopped: a stopped app runs no job (start it again)');
      else if (build?.image_id == null) ending = skipped('the deployment has no live release yet: deploy it first');
      else if (runtime.runOnce === undefined) ending = { status: 'failed', exit_code: null, message: 'this runtime does not run jobs (see docs/jobs.md)' };
      else if (typeof (image = jobImage(job, { image_id: build.image_id, release_set: build.release_set })) !== 'string') ending = { status: 'failed', exit_code: null, message: image.error };
      else {
        const vars = (await configs.buildConfig(build.id)) ?? (await configs.current(dep.id));
        const redactor = redactorFor([...vars, ...(await addedSecretVars(runtime, dep.id))]);
        const redact = redactor.stream();
        const target = { ...releaseTarget(dep, { id: build.id, image, vars }, this.#deps.settings), runId: run.id, command: job.command };
        try {
          const result = await runtime.runOnce(target, {
            timeoutMs: job.timeout_seconds * 1000,
            signal,
            startAt: startAt?.getTime(),
            ready: startAt === null || job.concurrency !== 'forbid' ? undefined : async () => (await store.startedCount(job.id, run.id)) === 0,
            onStarted: (id) => void store.setRunContainer(run.id, id).catch(() => undefined),
            onOutput: (text) => writer.append(redact.push(text)),
          });
          writer.append(redact.flush());
          ending = !result.started
            ? skipped(STILL_GOING)
            : result.timedOut
            ? { status: 'timed_out', exit_code: result.exitCode, message: `killed after ${job.timeout_seconds} s (its timeout_seconds)` }
            : result.exitCode === 0
              ? { status: 'succeeded', exit_code: 0, message: null }
              : { status: 'failed', exit_code: result.exitCode, message: result.exitCode === null ? 'the container vanished before it ended' : null };
        } catch (err) {
          writer.append(redact.flush());
          const why = signal.aborted ? String((signal.reason as Error).message) : err instanceof Error ? err.message : String(err);
          ending = { status: 'failed', exit_code: null, message: redactor.redact(why) };
        }
      }
    } catch (err) {
      ending = { status: 'failed', exit_code: null, message: err instanceof Error ? err.message : String(err) };
    }
    writer.append(`==> ${describeEnding(ending)}\n`);
    await writer.close();
    await store.finishRun(run.id, { ...ending, finished_at: (this.#deps.now?.() ?? new Date()).toISOString() });
    await store.pruneRuns(job.id, RUNS_KEPT);
    if ((ending.status === 'failed' || ending.status === 'timed_out') && subdomain !== undefined) {
      this.#deps.events.emit({
        type: 'job.failed', deploymentId: job.deployment_id, subdomain, jobId: job.id, jobName: job.name, runId: run.id, status: ending.status, exitCode: ending.exit_code,
      });
    }
  }
}

const STILL_GOING = 'the previous run was still going (concurrency forbid)';

const skipped = (message: string): Ending => ({ status: 'skipped', exit_code: null, message });

/** The run's last log line. */
function describeEnding(ending: Ending): string {
  if (ending.status === 'succeeded') return 'the run succeeded (exit code 0)';
  if (ending.status === 'timed_out') return `the run timed out: ${ending.message ?? ''}`;
  if (ending.status === 'skipped') return `the run was skipped: ${ending.message ?? ''}`;
  return ending.exit_code === null ? `the run failed: ${ending.message ?? ''}` : `the run failed with exit code ${ending.exit_code}`;
}

/** The image a run of `job` starts from: its compose `service`'s in the live release, else the release's image. */
export function jobImage(job: Pick<JobRow, 'service'>, build: { image_id: string; release_set?: string | null }): string | { error: string } {
  if (job.service == null) return build.image_id;
  const set = parseReleaseSet(build.release_set);
  if (set === null) return { error: `the job names service "${job.service}", but the live release is not a compose release (set service to null)` };
  const found = set.services.find((s) => s.name === job.service);
  if (found === undefined) return { error: `the live release has no service "${job.service}" (it has ${set.services.map((s) => s.name).join(', ')})` };
  return found.image;
}
