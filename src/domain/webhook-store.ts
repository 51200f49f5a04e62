// The webhook store port: the deliveries a deployment keeps and the target a delivery is for (implemented in src/db/webhook-store.ts).
import type { AuditRecord } from './audit.js';
import type { BuildRow } from './builds.js';
import type { Provider } from './webhook-delivery.js';

/** Deliveries a deployment keeps (newest first); rejected ones are kept apart so they cannot push the others out. */
export const KEEP_DELIVERIES = 100;
export const KEEP_REJECTED = 20;
/** How long a delivery id that deployed blocks a second build from the same delivery. */
export const DEDUP_WINDOW_MS = 24 * 60 * 60 * 1000;

/** `removed`: a pull request event removed a preview (decisions §17). */
export type DeliveryOutcome = 'deployed' | 'removed' | 'ignored' | 'rejected';

/** A deployment as its webhook sees it, with the secret in plain text (decrypted by the store). */
export interface HookTarget {
  readonly deploymentId: string;
  readonly userId: string;
  /** The deployment's team (null or absent: its creator's own). */
  readonly teamId?: string | null;
  readonly name: string;
  readonly repoUrl: string | null;
  readonly branch: string | null;
  readonly autoDeploy: boolean;
  /** Pull requests against the tracked branch get previews (decisions §17). */
  readonly previews: boolean;
  readonly secret: string;
}

/** A delivery as it is recorded and listed. */
export interface DeliveryRecord {
  readonly id: string;
  readonly received_at: string;
  readonly provider: Provider;
  readonly event: string | null;
  readonly delivery_id: string | null;
  readonly ref: string | null;
  readonly commit_sha: string | null;
  readonly outcome: DeliveryOutcome;
  readonly build_id: string | null;
  readonly reason: string;
}

/** Where webhooks live (src/db/webhook-store.ts encrypts the secret at rest under the installation key). */
export interface WebhookStore {
  /** The deployment and its secret; undefined when there is no such deployment or it has no webhook. */
  target(deploymentId: string): Promise<HookTarget | undefined>;
  /** Sets (creates or replaces) the deployment's secret; returns when. */
  setSecret(deploymentId: string, secret: string, audit?: AuditRecord): Promise<string>;
  /** When the deployment's webhook was (last) set, or undefined when it has none. */
  createdAt(deploymentId: string): Promise<string | undefined>;
  /**
   * Records a delivery and prunes old ones. With `dedupKey`, the record also claims that delivery id
   * for {@link DEDUP_WINDOW_MS}: returns 'duplicate' (recording nothing) when it is already claimed.
   */
  record(deploymentId: string, delivery: DeliveryRecord, dedupKey?: string): Promise<'recorded' | 'duplicate'>;
  /** Sets a recorded delivery's outcome; `releaseKey` frees its delivery id (the deploy did not start). */
  settle(deliveryId: string, change: { outcome: DeliveryOutcome; reason: string; buildId: string | null; releaseKey: boolean }): Promise<void>;
  /** The newest delivery that deployed (its commit is what a replay would deploy again), if any is kept. */
  lastDeployed(deploymentId: string): Promise<Pick<DeliveryRecord, 'delivery_id' | 'commit_sha' | 'build_id'> | undefined>;
  /** The build a claimed delivery id deployed, for the answer to a repeat. */
  claimedBuild(deploymentId: string, dedupKey: string): Promise<string | null>;
  /** The newest {@link KEEP_DELIVERIES} deliveries, newest first. */
  deliveries(deploymentId: string): Promise<DeliveryRecord[]>;
}

/** The tip of a branch in the remote repository (git ls-remote), or of its default branch when `branch` is undefined; `sha` null when the branch does not exist. */
export type BranchTip = (repoUrl: string, branch: string | undefined) => Promise<{ sha: string | null; branch: string }>;

/** The answer to a delivery: 200 with a message, or 202 with the build it started. */
export type DeliveryAnswer = { readonly status: 200; readonly message: string } | { readonly status: 202; readonly build: BuildRow };
