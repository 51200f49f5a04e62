// The deployment lifecycle the API drives: deploy, stop, restart, rollback, delete, runtime logs.
import type { BuildRow } from './builds.js';
import type { Principal } from '../core/principal.js';
import type { DeploymentAction } from './policy.js';

export interface DeployOptions {
  readonly wait: boolean;
  readonly signal?: AbortSignal;
  /** git only: build this commit (40 hex) of this branch instead of resolving the branch's head. */
  readonly commit?: { readonly sha: string; readonly branch: string };
}

import type { MetricsPoint } from './metrics-history.js';

/** GET /deployments/{id}/metrics: the live container's figures from the engine's stats. */
export interface ReplicaMetrics {
  cpu_percent: number;
  memory_bytes: number;
  memory_limit_bytes: number;
  network_rx_bytes: number;
  network_tx_bytes: number;
  restarts: number;
  started_at: string;
}

/** A live release's figures: each replica's, and their sums (started_at: the earliest). */
export interface DeploymentMetrics extends ReplicaMetrics {
  replicas: Array<ReplicaMetrics & { replica: number }>;
  /** A release of several services (compose): each service's figures summed. */
  services?: Array<ReplicaMetrics & { service: string; replicas: number }>;
}

/**
 * Lifecycle use-cases of one user's deployments. Each authorizes the principal first (another
 * user's deployment is `not_found`) and follows the state table of decisions §4.
 */
/** GET /deployments/{id}/services: one service of a compose deployment's live set. */
export interface ReleaseServiceView {
  readonly name: string;
  /** The one served at the subdomain. */
  readonly web: boolean;
  readonly image: string;
  /** Containers it is released with (`deploy.replicas`). */
  readonly replicas: number;
  /** Containers running now. */
  readonly running: number;
  /** running: all of them; degraded: some; down: none (stopped: the deployment is stopped). */
  readonly state: 'running' | 'degraded' | 'down' | 'stopped';
  /** Its health check's state over its containers (the worst); null without one. */
  readonly health: 'healthy' | 'unhealthy' | 'starting' | null;
}

export interface DeploymentOperations {
  /**
   * Creates a build record (`building`) and starts the release; with `wait`, resolves when it ends
   * (build_failed on failure). A git deployment builds its branch's head, or exactly `commit` when
   * given (a pushed commit: its sha and the branch it was pushed to).
   */
  deploy(principal: Principal, deploymentId: string, options: DeployOptions): Promise<BuildRow>;
  stop(principal: Principal, deploymentId: string): Promise<{ message: string }>;
  /** Cancels the build in flight, leaving the live release (if any) serving; invalid_state when none runs. */
  cancel(principal: Principal, deploymentId: string): Promise<{ message: string }>;
  restart(principal: Principal, deploymentId: string): Promise<{ message: string }>;
  rollback(principal: Principal, deploymentId: string, buildId: string): Promise<{ message: string }>;
  /** Removes the deployment with its containers, images, sources and logs; frees the subdomain. */
  /** `action`: what the policy checks (default `manage`; a preview is removed by whoever may `change` its deployment). */
  remove(principal: Principal, deploymentId: string, options?: { action?: DeploymentAction }): Promise<void>;
  /** A deployment was created: it gets a route (not served until its first release). */
  registered(deployment: { id: string; subdomain: string }): void;
  /** The live container's resource use (decisions §12); invalid_state when nothing runs. */
  metrics(principal: Principal, deploymentId: string, signal?: AbortSignal): Promise<DeploymentMetrics>;
  /** The sampled resource use of the last hour, oldest first (empty when none was sampled). */
  metricsHistory(principal: Principal, deploymentId: string): Promise<MetricsPoint[]>;
  /** The services of a compose deployment's live set, as they run now (empty for any other deployment). */
  services?(principal: Principal, deploymentId: string): Promise<ReleaseServiceView[]>;
  /** The live container's output. */
  runtimeLogs(
    principal: Principal,
    deploymentId: string,
    options: { tail: number | undefined; follow: boolean; signal: AbortSignal; service?: string | undefined },
  ): Promise<AsyncIterable<string>>;
}
