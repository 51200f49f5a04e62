// What the managed-database use-cases are handed: their store, the engine, the installation's settings, and the work running in the background.
import type { DeploymentCatalog } from '../domain/deployment-catalog.js';
import type { QuotaGuard } from '../domain/quotas.js';
import type { ContainerEngine } from '../runtime/engine.js';
import type { ServiceHost } from '../runtime/service-host.js';
import type { DatabaseStore } from './database-store.js';
import type { DatabaseEngineName } from './engine-adapter.js';
import type { DatabaseWork } from './database-work.js';

export type DatabaseLog = (level: 'info' | 'warn' | 'error', message: string, detail?: object) => void;

export interface DatabasesContext {
  readonly store: DatabaseStore;
  /** Deployments, for links (same owner or team) and the names a refusal gives. */
  readonly deployments: DeploymentCatalog;
  readonly quotas: QuotaGuard;
  readonly engine: ContainerEngine;
  /** Where each database runs (the engine's containers, or a swarm service pinned to the manager's node): its container is always on `engine`. */
  readonly services: ServiceHost;
  readonly instanceId: string;
  /** This instance's runner id (instances.id), recorded on the databases it brings up. */
  readonly self: string;
  /** SLIPWAY_DB_IMAGE_*: the image of each engine. */
  readonly images: Readonly<Record<DatabaseEngineName, string>>;
  /** Resource defaults and ceilings, as for apps. */
  readonly limits: { readonly defaultMemoryBytes: number; readonly defaultNanoCpus: number; readonly maxMemoryMb: number; readonly maxCpus: number };
  /** SLIPWAY_DB_SUBNET_POOL: where each database's network gets its /26. */
  readonly subnetPool: string;
  /** SLIPWAY_RUNTIME (`services` already follows it). */
  readonly runtime: 'docker' | 'swarm';
  /** Starts and creations running in the background on this instance. */
  readonly work: DatabaseWork;
  readonly log: DatabaseLog;
}
