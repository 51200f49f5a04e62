// This instance in the registry (GET /api/v1/instances), and the leader's chores over instances gone silent.
import type { BackgroundTask } from '../core/background.js';
import type { Log } from '../core/log.js';
import type { InstanceRegistry } from '../domain/instances.js';
import { VERSION } from '../version.js';
import type { Coordination } from './coordination.js';
import type { DeploymentStore } from './deployment-store.js';

/** How often an instance records itself in the registry by default (it is `lost` after 30 s of silence). */
export const HEARTBEAT_MS = 5_000;

export interface HeartbeatDeps {
  readonly registry: InstanceRegistry;
  readonly coordination: Pick<Coordination, 'isLeader' | 'onLeadership'>;
  readonly self: string;
  /** SLIPWAY_INSTANCE_URL: where the other instances call this one. */
  readonly url: string | undefined;
  readonly startedAt: string;
  buildsRunning(): number;
  readonly log: Log;
  /** Between two beats (HEARTBEAT_MS unless SLIPWAY_INSTANCE_LOST_SECONDS says otherwise). */
  readonly everyMs?: number;
}

/** Records this instance now; the leader drops instances gone for a day (every 720th beat: an hour). */
export function instanceHeartbeat(deps: HeartbeatDeps): { beat(): Promise<void>; tasks: BackgroundTask[] } {
  let beats = 0;
  const beat = async (): Promise<void> => {
    const leader = deps.coordination.isLeader();
    await deps.registry.heartbeat({ id: deps.self, url: deps.url ?? null, version: VERSION, startedAt: deps.startedAt, leader, buildsRunning: deps.buildsRunning() });
    if (leader && beats++ % 720 === 0) await deps.registry.prune(new Date());
  };
  const tasks: BackgroundTask[] = [
    { name: 'the instance heartbeat', scope: 'everyInstance', everyMs: deps.everyMs ?? HEARTBEAT_MS, run: beat },
    {
      // A change of leader shows in the registry at once, not at the next beat.
      name: 'the heartbeat on a change of leader',
      scope: 'everyInstance',
      run: (signal) => {
        const off = deps.coordination.onLeadership(() => {
          void beat().catch((err: unknown) => deps.log('warn', 'the instance heartbeat failed', { error: err }));
        });
        signal.addEventListener('abort', off, { once: true });
      },
    },
  ];
  return { beat, tasks };
}

export interface TakeOverDeps {
  readonly registry: Pick<InstanceRegistry, 'liveIds'>;
  readonly store: Pick<DeploymentStore, 'orphanedBuilds'>;
  /** The shared build queue's chore: slots held by lost instances are free again. */
  readonly queue: { forgetLost(live: readonly string[]): Promise<void> } | undefined;
  takeOver(deploymentId: string, buildId: string, from: string): Promise<unknown>;
  /** Between two looks (HEARTBEAT_MS unless SLIPWAY_INSTANCE_LOST_SECONDS says otherwise). */
  readonly everyMs?: number;
}

/** The leader takes over builds of instances gone silent (lost after 30 s by default): built again from the start here. */
export function takeOverBuildsTask(deps: TakeOverDeps): BackgroundTask {
  return {
    name: 'taking over the builds of a lost instance',
    scope: 'leaderOnly',
    everyMs: deps.everyMs ?? HEARTBEAT_MS,
    run: async () => {
      const live = await deps.registry.liveIds(new Date());
      // Slots held by lost instances are free again; their builds are queued again below.
      await deps.queue?.forgetLost(live);
      const orphans = await deps.store.orphanedBuilds(live);
      for (const orphan of orphans) await deps.takeOver(orphan.deploymentId, orphan.buildId, orphan.runner);
    },
  };
}
