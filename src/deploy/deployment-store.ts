// The deployment store: the port through which the lifecycle reads and writes deployments and builds.
import type { UsedDockerfile } from '../domain/used-dockerfile.js';
import type { Upstream } from '../core/upstream.js';
import type { AuditRecord } from '../domain/audit.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeploymentRow } from '../domain/deployments.js';
import type { DeploymentStatus } from './state-table.js';

/** A build about to start (the store assigns its order). */
export type NewBuild = Omit<BuildRow, 'seq'>;

/** A release that served a deployment before a switch, to be drained and removed. */
export interface RetiredContainer {
  readonly buildId: string;
  /** The runtime's release id. */
  readonly containerId: string;
  /** Where its replicas served (as recorded). */
  readonly upstreams: readonly Upstream[];
}

/** A deployment whose live build has a container (what the port watcher follows). */
export interface LiveContainer {
  readonly deploymentId: string;
  readonly subdomain: string;
  readonly buildId: string;
  readonly containerId: string;
  /** Where it serves as recorded (empty: it serves nowhere now, e.g. stopped or lost). */
  readonly upstreams: readonly Upstream[];
}

/** What decides a deployment's route on every instance: its status and its live release's upstreams. */
export interface RouteFact {
  readonly deploymentId: string;
  readonly subdomain: string;
  readonly status: DeploymentStatus;
  /** Where the live build's release serves while it has one, else empty. */
  readonly upstreams: readonly Upstream[];
}

/**
 * Every read and write of deployments and builds the lifecycle makes. Statuses come from the state
 * table (`transition`); the store writes them. Implemented over the database in src/db/. Every
 * write that changes what a deployment list shows (status, live build, delete) also bumps the
 * owner's list version in the same transaction (`DeploymentCatalog.listVersion`).
 */
export interface DeploymentStore {
  deployment(id: string): Promise<DeploymentRow | undefined>;
  /** A build of this deployment (undefined for another deployment's build). */
  build(deploymentId: string, buildId: string): Promise<BuildRow | undefined>;
  /** Records a `building` build and the deployment's new status, together. */
  startBuild(build: NewBuild, status: DeploymentStatus, audit?: AuditRecord): Promise<void>;
  /** With `audit`: the entry is appended in the same transaction. */
  setStatus(deploymentId: string, status: DeploymentStatus, audit?: AuditRecord): Promise<void>;
  /** The image a build produced (null: removed). */
  setImage(buildId: string, image: string | null): Promise<void>;
  /** Records the set of services a build releases (JSON, src/runtime/release-set.ts). Optional: stores without it hold single images only. */
  setReleaseSet?(buildId: string, set: string): Promise<void>;
  /** The Dockerfile a build uses, its own or generated (decisions §24). */
  recordDockerfile(buildId: string, used: UsedDockerfile): Promise<void>;
  /** Ends a build that is still `building` as failed or cancelled; a build already ended is left as it is. */
  finishBuild(buildId: string, status: 'failed' | 'cancelled', error: string): Promise<void>;
  /**
   * Makes `buildId`'s container the one that serves, in one transaction: no other build of the
   * deployment keeps a container, the build succeeds if it was building, and the deployment takes
   * `status` with this live build. Returns the containers it replaced.
   */
  switchLive(switchTo: { deploymentId: string; buildId: string; containerId: string; upstreams: readonly Upstream[]; status: DeploymentStatus }): Promise<RetiredContainer[]>;
  /** The release (the runtime's id, and its upstreams) a build runs as now. */
  setContainer(buildId: string, containerId: string, upstreams: readonly Upstream[]): Promise<void>;
  /** Moves a live release's upstreams, if the build still has that release. Returns whether it did. */
  moveUpstreams(buildId: string, containerId: string, upstreams: readonly Upstream[]): Promise<boolean>;
  remove(deploymentId: string, audit?: AuditRecord): Promise<void>;
  /** The ids of a deployment's previews (decisions §17: they are removed with it). */
  previewIds(deploymentId: string): Promise<string[]>;
  /** Succeeded builds that still have an image, newest first (image retention). */
  buildsWithImages(deploymentId: string): Promise<Array<{ id: string; image_id: string }>>;
  /** Live builds with a container, of deployments that should be serving. */
  liveContainers(): Promise<LiveContainer[]>;
  /** Builds still `building` whose runner is none of `live` (an instance that stopped heartbeating), oldest first. */
  orphanedBuilds(live: readonly string[]): Promise<Array<{ buildId: string; deploymentId: string; runner: string }>>;
  /**
   * The deployment's build in progress and the instance it belongs to (its runner): one running on
   * another instance, or waiting in the build queue. The caller has looked at its own builds in flight.
   */
  buildInProgress(deploymentId: string): Promise<{ id: string; runner: string } | undefined>;
  /** Takes a `building` build over from instance `from`: it becomes this instance's. False if it ended or another took it first. */
  claimBuild(buildId: string, from: string): Promise<boolean>;
  /** The route facts of one deployment (none if it is gone), or of every deployment. */
  routeFacts(deploymentId?: string): Promise<RouteFact[]>;
  /** Start-up recovery: every deployment and build (reconciliation with the engine). */
  everything(): Promise<{ deployments: DeploymentRow[]; builds: BuildRow[] }>;
  /**
   * Start-up recovery: this instance's builds a crash left `building` (not those waiting in the shared
   * queue), oldest first, each named with its runner (this instance: a build that had none recorded
   * becomes this instance's). The lifecycle queues them again; nothing about them changes here.
   */
  interruptedBuilds(): Promise<InterruptedBuild[]>;
}

/** A build this instance was running when it went down: queued again after the restart. */
export interface InterruptedBuild {
  readonly buildId: string;
  readonly deploymentId: string;
  /** The instance it belongs to (this one), for the claim that confirms it is still its own. */
  readonly runner: string;
}
