// The scheduled-jobs part of the server (decisions §22), built in one call from what main.ts has: the context the API uses, the scheduler and the reconciliation of runs.
import type { BackgroundTask } from '../core/background.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { AppEvent } from '../domain/app-events.js';
import type { DeploymentCatalog } from '../domain/deployment-catalog.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { ReleaseSettings } from '../runtime/release.js';
import { JobRunner } from './job-runner.js';
import { JobScheduler } from './job-scheduler.js';
import type { JobStore } from './job-store.js';
import type { JobsContext } from './jobs.js';
import { endOrphanedRuns } from './reconcile-runs.js';
import { RunLogWakeups } from './run-logs.js';

/** How often the leader ends the runs of instances that died while others live. */
const ORPHAN_CHECK_MS = 30_000;

export interface JobsPartDeps {
  readonly store: JobStore;
  readonly deployments: DeploymentCatalog;
  readonly configs: AppConfigStore;
  /** The app runtime (with linked databases): its `runOnce` runs the jobs. */
  readonly runtime: AppRuntime;
  readonly settings: ReleaseSettings;
  readonly self: string;
  readonly events: { emit(event: AppEvent): void };
  readonly background: { add(task: BackgroundTask): void };
  /** The control-plane instances alive now (their runner ids). */
  readonly liveInstances: () => Promise<ReadonlySet<string>>;
  readonly engineUp: boolean;
  readonly log: Log;
}

/** Builds the jobs part: the scheduler runs on every instance (each due time claimed once), runs left by a dead instance are ended. */
export function jobsPart(deps: JobsPartDeps): Part<JobsContext> {
  const wakeups = new RunLogWakeups();
  const runner = new JobRunner({ ...deps, wakeups });
  const scheduler = new JobScheduler({ store: deps.store, start: (job, dueAt) => runner.start(job, 'schedule', dueAt), log: deps.log });
  const context: JobsContext = {
    store: deps.store,
    deployments: deps.deployments,
    runner,
    scheduler,
    wakeups,
    // A runtime that runs no one-off (both built-in ones do, docs/jobs.md) has its jobs refused rather than never run.
    unsupported: deps.runtime.runOnce === undefined ? 'scheduled jobs need SLIPWAY_RUNTIME=docker: this runtime does not run one-off containers (see docs/jobs.md)' : undefined,
  };
  const endOrphans = async (atStart: boolean): Promise<void> => {
    const ended = await endOrphanedRuns({ store: deps.store, runtime: deps.runtime, self: deps.self, live: await deps.liveInstances(), atStart });
    if (ended > 0) deps.log('info', `${ended} job run(s) left running by a stopped instance were ended`);
  };
  deps.background.add({ name: 'the job scheduler', scope: 'everyInstance', run: (signal) => scheduler.run(signal) });
  deps.background.add({ name: 'ending orphaned job runs', scope: 'leaderOnly', everyMs: ORPHAN_CHECK_MS, run: () => endOrphans(false) });
  return {
    offers: context,
    start: async () => {
      if (deps.engineUp) await endOrphans(true).catch((err: unknown) => deps.log('warn', 'ending the job runs of a previous start failed', { err }));
    },
    stop: () => runner.close(),
  };
}
