// A release as a set of services: what the runtime starts, health-gates and switches as one (a Dockerfile app is a set of one).

/** A service's own health check, run by the engine inside its container (compose `healthcheck`). */
export interface SetHealthcheck {
  /** `["CMD", argv…]` or `["CMD-SHELL", "command"]` as the engine takes it. */
  readonly test: readonly string[];
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly startPeriodMs: number;
}

/** A named volume a service mounts: the deployment's own, kept across releases. */
export interface SetVolume {
  readonly name: string;
  readonly target: string;
  readonly readOnly: boolean;
}

/** One service of a set, its image already built or taken from the engine. */
export interface SetService {
  readonly name: string;
  readonly image: string;
  readonly command?: readonly string[] | undefined;
  readonly entrypoint?: readonly string[] | undefined;
  /** Its own environment (the deployment's variables are added over it when it starts). */
  readonly environment: Readonly<Record<string, string>>;
  readonly healthcheck?: SetHealthcheck | undefined;
  /** Services started (or healthy) before this one. */
  readonly dependsOn: ReadonlyArray<{ readonly service: string; readonly condition: 'service_started' | 'service_healthy' }>;
  readonly replicas: number;
  /** Ports it listens on, on the set's network only (never published). */
  readonly ports: readonly number[];
  readonly volumes: readonly SetVolume[];
  readonly workingDir?: string | undefined;
  readonly user?: string | undefined;
}

/** The services of one release in start order (depends_on first); `web` is served at the subdomain on `port` (null: the app's PORT rule). */
export interface ReleaseSet {
  readonly web: string;
  readonly port: number | null;
  readonly services: readonly SetService[];
}

/** The set as stored with its build (JSON), so rollback and recovery re-release exactly it. */
export function serializeReleaseSet(set: ReleaseSet): string {
  return JSON.stringify(set);
}

/** The set stored with a build; null when the build is a single image (no set stored). */
export function parseReleaseSet(json: string | null | undefined): ReleaseSet | null {
  if (json === null || json === undefined || json === '') return null;
  return JSON.parse(json) as ReleaseSet;
}

/** The web service of a set. */
export function webService(set: ReleaseSet): SetService {
  const web = set.services.find((s) => s.name === set.web);
  if (web === undefined) throw new Error(`the release set has no service "${set.web}"`);
  return web;
}
