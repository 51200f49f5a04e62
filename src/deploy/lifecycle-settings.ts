// What the deployment lifecycle is configured with (from src/config.ts, wired in main.ts).
import type { BaseImages } from '../stacks/stack-types.js';

export interface LifecycleSettings {
  /** This installation's id (labels its engine objects). */
  readonly instanceId: string;
  readonly dataDir: string;
  readonly allowPrivateGit: boolean;
  readonly buildTimeoutMs: number;
  readonly startupTimeoutMs: number;
  readonly keepImages: number;
  readonly defaultMemoryBytes: number;
  readonly defaultNanoCpus: number;
  /** Pids limit of every app container. */
  readonly appPidsLimit: number;
  /** The IPv4 range a compose release's own network takes a /26 of (SLIPWAY_DB_SUBNET_POOL). */
  readonly subnetPool?: string | undefined;
  /** How builds' RUN steps are confined (the network is this installation's build network). */
  readonly build: { readonly network: 'confined' | 'none'; readonly memoryBytes: number; readonly nanoCpus: number; readonly pidsLimit: number };
  readonly maxConcurrentBuilds: number;
  /** Releases started again at once by recovery (server start, containers found stopped). */
  readonly recoveryConcurrency: number;
  /** Base images of generated Dockerfiles (decisions §24); the defaults when absent. */
  readonly baseImages?: BaseImages;
  /** Base environment of git processes ({ PATH, HOME }). */
  readonly gitEnv: Record<string, string>;
}
