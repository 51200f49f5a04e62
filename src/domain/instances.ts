// The control-plane instances sharing the database, as administrators see them (decisions §15).
import type { Principal } from '../core/principal.js';
import { authorizeAdmin } from './policy.js';

/** An instance silent this long is `lost` (the default of SLIPWAY_INSTANCE_LOST_SECONDS); a lost one is dropped from the list after a day. */
export const LOST_AFTER_MS = 30_000;
export const DROPPED_AFTER_MS = 24 * 60 * 60_000;

/** How often an instance records itself, and the leader looks for lost ones: six beats fit in the silence that makes one lost (5 s of 30 s). */
export function heartbeatEvery(lostAfterMs: number): number {
  return Math.max(500, Math.round(lostAfterMs / 6));
}

/** One instance as `GET /api/v1/instances` shows it. */
export interface InstanceView {
  readonly id: string;
  readonly url: string | null;
  readonly version: string;
  readonly state: 'live' | 'lost';
  readonly started_at: string;
  readonly last_seen_at: string;
  readonly leader: boolean;
  readonly builds_running: number;
}

/** What an instance reports with each heartbeat. */
export interface InstanceBeat {
  readonly id: string;
  readonly url: string | null;
  readonly version: string;
  readonly startedAt: string;
  readonly leader: boolean;
  readonly buildsRunning: number;
}

/** The registry port (implemented in src/db/instance-registry.ts). */
export interface InstanceRegistry {
  /** Records this instance as seen now, with its current figures. */
  heartbeat(beat: InstanceBeat): Promise<void>;
  /** Instances seen within the last day, oldest start first. */
  list(now: Date): Promise<InstanceView[]>;
  /** The live instances' URLs by id (inter-instance calls). */
  liveUrls(now: Date): Promise<Map<string, string>>;
  /** The ids of the live instances. */
  liveIds(now: Date): Promise<string[]>;
  /** Drops instances silent for more than a day (the leader's chore). */
  prune(now: Date): Promise<number>;
}

/** `GET /api/v1/instances`: administrators only. */
export async function listInstances(registry: InstanceRegistry, principal: Principal): Promise<InstanceView[]> {
  authorizeAdmin(principal);
  return registry.list(new Date());
}
