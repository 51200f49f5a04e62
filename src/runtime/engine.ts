// The container engine: the small interface build and release code uses to talk to Docker.
import type { Upstream } from '../core/upstream.js';

/** "true" on every image and container Slipway creates. */
export const LABEL_MANAGED = 'dev.slipway.managed';
/** The installation (database) an image or container belongs to. */
export const LABEL_INSTANCE = 'dev.slipway.instance';
/** The deployment id an image or container belongs to. */
export const LABEL_DEPLOYMENT = 'dev.slipway.deployment';
/** The build id an image or container was made from. */
export const LABEL_BUILD = 'dev.slipway.build';

export interface BuildImageOptions {
  /** Directory sent as the build context. */
  contextDir: string;
  /** Dockerfile path relative to contextDir (forward slashes). */
  dockerfile: string;
  /** `repo:tag` given to the built image. */
  tag: string;
  /** Labels added to the image. */
  labels: Record<string, string>;
  /** Aborts the build; the caller also uses it as the build's time limit. */
  signal: AbortSignal;
  /** Receives the build output as it arrives. */
  onOutput(text: string): void;
  /** Where and within what limits the build's RUN steps run. */
  sandbox: BuildSandbox;
  /** Build arguments (`--build-arg`): only for ARGs the Dockerfile declares, never secrets. */
  buildArgs?: Record<string, string>;
  /** The stage of a multi-stage Dockerfile built (compose `build.target`); absent: the last one. */
  target?: string;
  /**
   * A Dockerfile the source does not have (generated, decisions §24): used instead of reading
   * `dockerfile`, sent at that path in the context, and checked by the same policy as any other.
   */
  dockerfileText?: string;
}

/** A named engine volume mounted into a container. */
export interface VolumeMount {
  /** The engine volume's name. */
  readonly source: string;
  /** Absolute path inside the container. */
  readonly target: string;
  /** Mounted read-only (compose `:ro`). */
  readonly readOnly?: boolean;
}

export interface VolumeOptions {
  name: string;
  labels: Record<string, string>;
}

export interface VolumeInfo {
  name: string;
  labels: Record<string, string>;
}

/**
 * The confinement of a build's RUN steps. `confined`: they run on `network`, a bridge from which
 * the host, its private networks and other containers are unreachable (internet and DNS remain);
 * `none`: no network at all.
 */
export interface BuildSandbox {
  network: { mode: 'confined'; name: string; labels: Record<string, string> } | { mode: 'none' };
  memoryBytes: number;
  nanoCpus: number;
  /** Most processes and threads the build's RUN steps may hold at once. */
  pidsLimit: number;
}

/** The network an installation's builds run on (see BuildSandbox). */
export function buildNetworkName(instanceId: string): string {
  return `slipway-${instanceId}-build`;
}

/** One line a container printed, as the engine logged it. */
export interface OutputLine {
  readonly stream: 'stdout' | 'stderr';
  /** When the engine read it, in nanoseconds since the epoch. */
  readonly atNs: bigint;
  readonly text: string;
}

export interface RunContainerOptions {
  image: string;
  /** Container name; see `containerName`. */
  name: string;
  labels: Record<string, string>;
  env: Record<string, string>;
  /** The TCP port the app listens on inside the container; published on 127.0.0.1. */
  containerPort: number;
  memoryBytes: number;
  nanoCpus: number;
  /** Most processes and threads the container may hold at once. */
  pidsLimit: number;
  /** The network the container joins (see ensureNetwork); it must exist. */
  network: string;
  /** Named volumes to mount (see ensureVolume); they must exist. */
  volumes?: readonly VolumeMount[];
  /**
   * False: the engine does not restart the container when it exits (a release on trial, whose
   * first run's output is its crash report); {@link ContainerEngine.keepRestarting} turns the
   * restart policy on once it is healthy. Default true (restart policy unless-stopped).
   */
  restartOnCrash?: boolean;
  /** False: the port is published nowhere (a database, reached only over its own network). Default true. */
  publish?: boolean;
  /** Host names the container answers to on `network` (the engine's DNS on user-defined networks). */
  networkAliases?: readonly string[];
  /** Further networks (they must exist) the container joins before it starts: a linked database's. */
  extraNetworks?: readonly string[];
  /** Capabilities kept (default APP_CAPABILITIES); every other one is dropped. */
  capabilities?: readonly string[];
  /** The image's command, replaced (an argv: never a shell string). */
  command?: readonly string[];
  /** False: created (and joined to its networks) but not started; `startContainer` starts it. Default true. */
  start?: boolean;
  /** The image's entrypoint, replaced (an argv). */
  entrypoint?: readonly string[];
  workingDir?: string;
  user?: string;
  /** A health check the engine runs inside the container (its state shows in ContainerInfo.health). */
  healthcheck?: { test: readonly string[]; intervalMs: number; timeoutMs: number; retries: number; startPeriodMs: number };
  /** A further network joined before the start, answering to `aliases` there (a release set's own network). */
  aliasedNetwork?: { name: string; aliases: readonly string[] };
}

/** A command running inside a container, its stdout a stream (see ContainerEngine.execStream). */
export interface ExecStream {
  /** Its stdout; a consumer that stops reading stalls the command (backpressure). */
  readonly stdout: import('node:stream').Readable;
  /** Resolves once it ended: its exit code and the tail of its stderr. */
  readonly done: Promise<ExecResult>;
}

/** What a command run inside a container ended with. */
export interface ExecResult {
  readonly exitCode: number;
  /** stdout and stderr together, at most the last 16 KiB. */
  readonly output: string;
}

export interface NetworkOptions {
  name: string;
  labels: Record<string, string>;
  /** Containers on the network cannot reach one another (inter-container communication off). */
  isolated: boolean;
  /** The Linux bridge interface's name (at most 15 characters); the engine picks one if absent. */
  bridgeName?: string;
  /**
   * Containers on the network reach no link-local address (cloud metadata) and open no connection
   * to the host itself but DNS and the edge's public ports (the app network; see decisions).
   */
  confined?: boolean;
  /** No route out of the network: its containers reach each other and nothing else (a database's network). */
  internal?: boolean;
  /** The network's IPv4 subnet (CIDR); the engine picks one from its pools when absent. */
  subnet?: string;
}

export interface NetworkInfo {
  id: string;
  name: string;
  labels: Record<string, string>;
}

export interface ContainerInfo {
  id: string;
  name: string;
  running: boolean;
  /** Exit code of the last run; null while running or never started. */
  exitCode: number | null;
  /** The port published for the app on the engine's host; null when not published (stopped, restarting). */
  hostPort: number | null;
  /** Where the control plane reaches the app's HTTP; null when not published. */
  upstream: Upstream | null;
  labels: Record<string, string>;
  /** Engine state: created, running, restarting, exited, paused, dead, removing. */
  state: string;
  /** The engine's health check state (starting, healthy, unhealthy); undefined when the container has none. */
  health?: string;
  /** Named volumes it mounts read-write (filled by listContainers; undefined where the engine does not say). */
  volumes?: string[];
}

/** One exit of a container, from the engine's event log. */
export interface ContainerExit {
  readonly id: string;
  readonly exitCode: number;
  /** Milliseconds since the epoch. */
  readonly at: number;
  /** The engine's own time of it (nanoseconds), which names the exit with the id. */
  readonly atNs: string;
}

/** A running container's resource use at one moment (the engine's one-shot stats). */
export interface ContainerStats {
  /** CPU use since the engine's previous sample, in percent of one CPU (200 = two CPUs busy). */
  cpuPercent: number;
  /** Memory in use, page cache excluded. */
  memoryBytes: number;
  /** The container's memory limit. */
  memoryLimitBytes: number;
  /** Bytes received and sent on all its interfaces since it started. */
  networkRxBytes: number;
  networkTxBytes: number;
  /** How many times the engine restarted it (restart policy). */
  restarts: number;
  /** When its current run started (ISO 8601). */
  startedAt: string;
}

export interface ImageInfo {
  id: string;
  tags: string[];
  labels: Record<string, string>;
}

export interface ContainerEngine {
  /** Checks the engine answers; resolves with its version. */
  ping(signal?: AbortSignal): Promise<{ version: string; apiVersion: string }>;
  /**
   * Builds; resolves with the image id. On a failed build throws EngineBuildError carrying the
   * output tail; on abort, stops reading, and throws an AbortError (err.name === 'AbortError').
   */
  buildImage(options: BuildImageOptions): Promise<{ imageId: string }>;
  /** Ports the image EXPOSEs (tcp only), sorted. */
  imageExposedPorts(image: string): Promise<number[]>;
  imageExists(image: string): Promise<boolean>;
  /** Removes an image (force), ignoring "not found". */
  removeImage(image: string): Promise<void>;
  /**
   * Creates and starts a confined container: containerPort/tcp published on 127.0.0.1 with an
   * engine-chosen host port, env, labels, memory/cpu/pids limits, restart policy unless-stopped,
   * an init process, every capability dropped but a web server's few (APP_CAPABILITIES),
   * no-new-privileges and rotated logs.
   */
  runContainer(options: RunContainerOptions): Promise<ContainerInfo>;
  /** Everything a container printed, line by line with its stream and time (for crash reports). Optional. */
  containerOutput?(id: string, signal?: AbortSignal): Promise<OutputLine[]>;
  /**
   * Containers carrying every one of `labels` that exited between two times (ms since the epoch;
   * the engine's event log, one call for all of them), oldest first. Optional: an engine without
   * it reports no crash.
   */
  containerExits?(labels: Record<string, string>, sinceMs: number, untilMs: number, signal?: AbortSignal): Promise<ContainerExit[]>;
  /** Sets a container's restart policy to unless-stopped (one started with `restartOnCrash: false`). Optional: an engine without it restarts from the start. */
  keepRestarting?(id: string): Promise<void>;
  /** Null when the container does not exist. */
  inspectContainer(id: string): Promise<ContainerInfo | null>;
  /** Starts a stopped container (no-op if running); returns fresh info, host port included. */
  startContainer(id: string): Promise<ContainerInfo>;
  /** Graceful stop (SIGTERM, then kill after timeoutSeconds); ignores not-found and already stopped. */
  stopContainer(id: string, timeoutSeconds: number): Promise<void>;
  /** Force-removes a container, ignoring not-found. */
  removeContainer(id: string): Promise<void>;
  /**
   * Demultiplexed stdout+stderr as text chunks. `follow` keeps streaming until the container
   * stops or signal aborts (then the iteration just ends). tail: last N lines (undefined = all).
   * timestamps: each line starts with the engine's RFC 3339 time of it and a space.
   */
  containerLogs(id: string, options: { tail?: number; follow: boolean; signal?: AbortSignal; timestamps?: boolean }): AsyncIterable<string>;
  /** Resource use of a running container; null when it does not exist or is not running. */
  containerStats(id: string, signal?: AbortSignal): Promise<ContainerStats | null>;
  /** All containers (stopped ones too) carrying every one of these labels. */
  listContainers(labels: Record<string, string>): Promise<ContainerInfo[]>;
  /** All images carrying every one of these labels. */
  listImages(labels: Record<string, string>): Promise<ImageInfo[]>;
  /** Creates a bridge network unless one of that name exists; resolves with its id. */
  ensureNetwork(options: NetworkOptions): Promise<{ id: string }>;
  /** Removes a network, ignoring not-found; containers still on it make this throw. */
  removeNetwork(name: string): Promise<void>;
  /** All networks carrying every one of these labels. */
  listNetworks(labels: Record<string, string>): Promise<NetworkInfo[]>;
  /** Creates a named volume unless one of that name exists (its data is kept). */
  ensureVolume(options: VolumeOptions): Promise<void>;
  /** Removes a volume and its data, ignoring not-found; a container still using it makes this throw. */
  removeVolume(name: string): Promise<void>;
  /** All volumes carrying every one of these labels. */
  listVolumes(labels: Record<string, string>): Promise<VolumeInfo[]>;
  /**
   * Runs `argv` inside a running container (with `env` added) and waits for it within `timeoutMs`.
   * Optional: services that probe themselves (databases) need it.
   */
  execInContainer?(id: string, argv: readonly string[], options: { env?: Record<string, string>; timeoutMs: number }): Promise<ExecResult>;
  /**
   * Runs `argv` inside a running container with its stdout as a stream and `stdin` (if given) piped
   * in: database dumps and restores that are never held whole in memory. `onStderr` hears its stderr
   * as it comes (a session that reports on stderr while it runs). Optional.
   */
  execStream?(id: string, argv: readonly string[], options: { env?: Record<string, string>; stdin?: import('node:stream').Readable; signal: AbortSignal; onStderr?: (text: string) => void }): Promise<ExecStream>;
  /** Attaches a container to a network (answering to `aliases` there); a no-op when already attached. Optional. */
  connectNetwork?(network: string, containerId: string, aliases?: readonly string[]): Promise<void>;
  /** Detaches a container from a network, ignoring one that is gone or not attached. Optional. */
  disconnectNetwork?(network: string, containerId: string): Promise<void>;
  /** The container's IPv4 address on `network` (null when it is not attached or has none). Optional. */
  containerAddress?(id: string, network: string): Promise<string | null>;
  /** Pulls an image from its registry. Optional. */
  pullImage?(ref: string, signal: AbortSignal): Promise<void>;
}

/**
 * The only capabilities an app container keeps: enough for a web server that starts as root,
 * binds a low port and drops to its own user (nginx, Apache, images using gosu/su-exec), signals
 * its workers and chowns its own files. Gone are NET_RAW (spoofing on the bridge), MKNOD,
 * SETFCAP, SETPCAP, DAC_OVERRIDE, FOWNER, FSETID, SYS_CHROOT and AUDIT_WRITE.
 */
export const APP_CAPABILITIES: readonly string[] = ['CHOWN', 'SETUID', 'SETGID', 'KILL', 'NET_BIND_SERVICE'];
/** Container log rotation: json-file logs of at most this many files of this size. */
export const APP_LOG_MAX_SIZE = '10m';
export const APP_LOG_MAX_FILES = 3;

/** A build the engine ran and that failed (bad Dockerfile, failing RUN, missing file...). */
export class EngineBuildError extends Error {
  override readonly name = 'EngineBuildError';
  /** The last lines of the build output, error included. */
  readonly outputTail: string;

  constructor(message: string, outputTail: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.outputTail = outputTail;
  }
}

/**
 * The network an installation's app containers share. Inter-container communication is off on it,
 * so no container reaches another (another deployment's, or its own older release) by address.
 */
export function appNetworkName(instanceId: string): string {
  return `slipway-${instanceId}-apps`;
}

/**
 * A valid, stable container name for a deployment's build: `slipway-<12 chars>-<12 chars>`.
 * Ids are reduced to `[a-z0-9]` so any id shape (UUIDs included) gives a legal engine name.
 */
export function containerName(deploymentId: string, buildId: string): string {
  const short = (id: string): string => id.toLowerCase().replace(/[^a-z0-9]/g, '').slice(0, 12) || 'x';
  return `slipway-${short(deploymentId)}-${short(buildId)}`;
}
