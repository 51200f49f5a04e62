// The release switch: a build's image started as a new release, traffic moved to it, the old release drained and retired.
import { parseReleaseSet } from '../runtime/release-set.js';
import { DomainError } from '../core/errors.js';
import type { Upstream } from '../core/upstream.js';
import type { EnvVar } from '../domain/app-config.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeploymentRow } from '../domain/deployments.js';
import { ReleaseError, releaseTarget } from '../runtime/release.js';
import { redactorFor } from '../secrets/redact.js';
import type { BackgroundTasks } from './background-tasks.js';
import { pruneImages } from './images.js';
import { servingUpstreams, type LifecycleParts } from './lifecycle-parts.js';
import type { DeploymentStatus } from './state-table.js';

/** Seconds an old container gets to finish its in-flight requests, then to stop, after a switch. */
const DRAIN_MS = 30_000;
export const STOP_SECONDS = 10;

/** Moves a deployment's traffic to a new release; the caller holds the deployment's lock. */
export class ReleaseSwitch {
  readonly #parts: LifecycleParts;
  readonly #background: BackgroundTasks;

  constructor(parts: LifecycleParts, background: BackgroundTasks) {
    this.#parts = parts;
    this.#background = background;
  }

  /** Starts `build`'s image as a new container and switches traffic to it (restart and rollback). Caller holds the lock. */
  async release(dep: DeploymentRow, build: BuildRow, vars: readonly EnvVar[], status: DeploymentStatus, signal: AbortSignal): Promise<void> {
    const { deps, runtime } = this.#parts;
    if (build.image_id === null) throw new DomainError('invalid_state', 'the build has no image');
    let container;
    try {
      container = await runtime.startRelease(releaseTarget(dep, { id: build.id, image: build.image_id, vars, set: parseReleaseSet(build.release_set) }, deps.settings), {
        timeoutMs: deps.settings.startupTimeoutMs,
        signal,
      });
    } catch (err) {
      if (err instanceof ReleaseError) throw new DomainError('invalid_state', redactorFor(vars).redact(`the release did not start: ${err.message}`));
      throw err;
    }
    await this.switchTo(dep, build.id, container.id, container.upstreams, status);
  }

  /**
   * Makes `buildId`'s new container live: database first (so a crash after this point recovers
   * to it), then the routing table, then the old container is drained and stopped in the background.
   */
  async switchTo(dep: DeploymentRow, buildId: string, containerId: string, upstreams: readonly Upstream[], status: DeploymentStatus): Promise<void> {
    const { deps, recovery } = this.#parts;
    const { store, dataPlane } = deps;
    // The old release is drained where the edges were sending its traffic.
    const oldUpstreams = await servingUpstreams(this.#parts, dep);
    recovery.forget(dep.id);
    const previous = await store.switchLive({ deploymentId: dep.id, buildId, containerId, upstreams, status });
    dataPlane.publish(dep.subdomain, { kind: 'app', deploymentId: dep.id, state: 'live', upstreams });
    for (const old of previous) {
      this.#retire(
        old.containerId,
        oldUpstreams.filter((u) => old.upstreams.some((o) => o.host === u.host && o.port === u.port)),
      );
    }
    this.#background.track(pruneImages(store, deps.engine, dep.id, deps.settings.keepImages));
  }

  /** Drains and stops an old release in the background. */
  #retire(releaseId: string, upstreams: readonly Upstream[]): void {
    const { deps, runtime } = this.#parts;
    this.#background.track(
      (async () => {
        await Promise.all(upstreams.map((upstream) => deps.dataPlane.drain(upstream, DRAIN_MS)));
        await runtime.stopRelease(releaseId, STOP_SECONDS);
        await runtime.removeRelease(releaseId);
      })(),
    );
  }
}
