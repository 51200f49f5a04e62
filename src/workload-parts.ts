// The parts that run an app's other work beside its web process: database backups, scheduled jobs and the notifications about them (decisions §20, §22, §23).
import { backupsPart } from './backups/backups-part.js';
import type { Background } from './core/background.js';
import type { Log } from './core/log.js';
import type { Parts } from './core/parts.js';
import type { Config } from './config.js';
import type { DatabaseOffers } from './db/database-part.js';
import { databaseJobStore } from './db/job-store.js';
import type { Stores } from './db/stores.js';
import type { DatabasesPart } from './databases/databases-part.js';
import type { LifecycleOffers } from './deploy/lifecycle-part.js';
import { jobsPart } from './jobs/jobs-part.js';
import { notificationsPart } from './notifications/notifications-part.js';
import type { RuntimeOffers } from './runtime/runtime-part.js';

export interface WorkloadDeps {
  readonly config: Config;
  readonly log: Log;
  /** This instance's runner id. */
  readonly runner: string;
  readonly database: DatabaseOffers;
  readonly stores: Stores;
  readonly background: Background;
  readonly databases: DatabasesPart;
  readonly deploy: LifecycleOffers;
  readonly runtime: RuntimeOffers;
}

/** Adds the backups, jobs and notifications parts (in that order) and returns what the API serves of them. */
export async function addWorkloads(parts: Parts, deps: WorkloadDeps) {
  const { config, log, runner, database, stores, background, databases, deploy, runtime } = deps;
  const backups = parts.add('backups', await backupsPart({ config, stores, cipher: database.cipher, runner, databases: databases.context, events: deploy.appEvents,
    restartApp: (principal, deploymentId) => deploy.lifecycle.restart(principal, deploymentId), liveIds: () => stores.registry.liveIds(new Date()) }));
  background.add(backups.task);
  background.add(backups.walTask);
  // Scheduled jobs (decisions §22): one-off runs of the live release through the runtime, each due time once across instances.
  const jobs = parts.add('jobs', jobsPart({
    store: databaseJobStore(database.db), deployments: stores.catalog, configs: stores.configs, runtime: runtime.runtime, self: runner, events: deploy.appEvents, background, log, engineUp: runtime.engineUp,
    settings: { instanceId: database.instanceId, defaultMemoryBytes: config.defaultMemoryBytes, defaultNanoCpus: config.defaultNanoCpus, appPidsLimit: config.appPidsLimit },
    liveInstances: async () => new Set([runner, ...(await stores.registry.liveUrls(new Date())).keys()]),
  }));
  // Notifications (decisions §23): every instance writes the events it sees to the shared outbox.
  const notifications = parts.add('notifications', notificationsPart({ config, log, self: runner, store: stores.notificationStore, appEvents: deploy.appEvents, background }));
  return { backups: backups.context, jobs, notifications };
}
