// The managed-databases part of the server, built in one call from what main.ts has: the context the API uses, the runtime wrapper for links, reconciliation and shutdown.
import type { Config } from '../config.js';
import type { DeploymentCatalog } from '../domain/deployment-catalog.js';
import { heartbeatEvery } from '../domain/instances.js';
import { QuotaGuard, type QuotaStore } from '../domain/quotas.js';
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { engineServiceHost, type ServiceHost } from '../runtime/service-host.js';
import type { DatabaseLog, DatabasesContext } from './database-context.js';
import type { DatabaseStore } from './database-store.js';
import { linkedReleaseParts, linkedSecretValues } from './database-links.js';
import { DatabaseWork } from './database-work.js';
import { withLinkedDatabases } from './linked-runtime.js';
import { reconcileDatabases } from './reconcile-databases.js';
import { databaseConnector } from './database-connect.js';
import { takeoverTask } from './database-takeover.js';
import type { BackgroundTask } from '../core/background.js';
import type { Principal } from '../core/principal.js';
import type { Part } from '../core/parts.js';
import type http from 'node:http';
import type { Duplex } from 'node:stream';

export interface DatabasesPart {
  readonly context: DatabasesContext;
  /** The app runtime whose releases get their linked databases (variables and networks). */
  wrap(runtime: AppRuntime): AppRuntime;
  /** Finishes half-created databases and restarts lost ones (the leader, alone, at start). */
  reconcile(): Promise<number>;
  /** `slipway db connect`'s WebSocket upgrades (true when taken). */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /** Aborts starts in flight (they are finished at the next start) and closes connections. */
  close(): Promise<void>;
}

/**
 * The databases part as the server's parts list takes it (src/core/parts.ts): built after the
 * runtime, reconciled at start by a leader alone, stopped before the database closes.
 */
export async function databasesPart(options: Parameters<typeof createDatabasesPart>[0] & {
  /** Whether this instance may reconcile now: it leads and no other instance is live. */
  readonly leadsAlone: () => Promise<boolean>;
  /** The runner ids of the instances whose heartbeat is fresh. */
  readonly liveInstances: () => Promise<readonly string[]>;
  readonly background: { add(task: BackgroundTask): void };
  readonly engineUp: boolean;
}): Promise<Part<DatabasesPart>> {
  const part = createDatabasesPart(options);
  if (options.engineUp) options.background.add(takeoverTask(part.context, options.liveInstances, heartbeatEvery(options.config.instanceLostMs)));
  return {
    offers: part,
    start: async () => {
      if (options.engineUp && (await options.leadsAlone())) await part.reconcile();
    },
    stop: () => part.close(),
  };
}

export function createDatabasesPart(options: {
  /** The stores it reads and writes (built over the database by the stores part). */
  readonly stores: { readonly managedDatabases: DatabaseStore; readonly catalog: DeploymentCatalog; readonly quotaStore: QuotaStore };
  readonly engine: ContainerEngine;
  /** Where databases run (the runtime part's); absent: containers on `engine`. */
  readonly services?: ServiceHost | undefined;
  readonly config: Config;
  readonly instanceId: string;
  /** This instance's runner id (instances.id). */
  readonly self: string;
  readonly log: DatabaseLog;
  /** The principal of a bearer token (401 otherwise), for WebSocket upgrades. */
  readonly authenticate: (bearer: string | undefined) => Promise<Principal>;
  /** Answers a refused upgrade with the API's status and `{error, message}`. */
  readonly refuse: (socket: Duplex, err: unknown) => void;
}): DatabasesPart {
  const { config } = options;
  const context: DatabasesContext = {
    store: options.stores.managedDatabases,
    deployments: options.stores.catalog,
    quotas: new QuotaGuard(options.stores.quotaStore, config.quotas),
    engine: options.engine,
    services: options.services ?? engineServiceHost(options.engine),
    instanceId: options.instanceId,
    self: options.self,
    images: config.databaseImages,
    limits: { defaultMemoryBytes: config.defaultMemoryBytes, defaultNanoCpus: config.defaultNanoCpus, maxMemoryMb: config.maxMemoryMb, maxCpus: config.maxCpus },
    subnetPool: config.databaseSubnetPool,
    runtime: config.runtime,
    work: new DatabaseWork(),
    log: options.log,
  };
  const connector = databaseConnector(context, options.authenticate, options.refuse);
  return {
    context,
    handleUpgrade: (req, socket, head) => connector.handleUpgrade(req, socket, head),
    wrap: (runtime) => withLinkedDatabases(runtime, (deploymentId) => linkedReleaseParts(context, deploymentId), (deploymentId) => linkedSecretValues(context, deploymentId)),
    reconcile: () => reconcileDatabases(context),
    close: async () => {
      connector.close();
      await context.work.close();
    },
  };
}
