// Starting one replica of a release on an engine: run a build's image beside the old one and wait until it is healthy.
import crypto from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Upstream } from '../core/upstream.js';
import type { EnvVar } from '../domain/app-config.js';
import { parseStoredVolumes } from '../domain/volumes.js';
import type { ContainerEngine, ContainerInfo, RunContainerOptions } from './engine.js';
import type { ReleaseSet } from './release-set.js';
import { immediateTurn, type EngineTurn, type ReleaseTarget } from './app-runtime.js';
import { LABEL_BUILD, LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, appNetworkName, containerName } from './engine.js';
import { prepareVolumes } from './volumes.js';
import { lastWords } from './last-words.js';
import { wrongAnnouncedPort, wrongPortReason } from './announced-port.js';

/** The port an app listens on: the image's single EXPOSEd port, else 8080 (decisions §5). */
export async function appPort(engine: ContainerEngine, image: string): Promise<number> {
  const ports = await engine.imageExposedPorts(image);
  return ports.length === 1 && ports[0] !== undefined ? ports[0] : 8080;
}

/**
 * A release that did not become healthy. The message says why in Slipway's words and ends with the
 * app's own last output line when it printed one; `reason` is the first part alone (for server logs).
 */
export class ReleaseError extends Error {
  override readonly name = 'ReleaseError';
  readonly reason: string;

  constructor(reason: string, appLastLine = '') {
    super(appLastLine === '' ? reason : `${reason}; its last line: ${appLastLine}`);
    this.reason = reason;
  }
}

/** A container's environment: the variables, then PORT (reserved: no variable can be named PORT). */
export function releaseEnv(vars: readonly EnvVar[], port: number): Record<string, string> {
  // fromEntries defines own properties: a variable named like an Object.prototype member stays a variable.
  return Object.fromEntries([...vars.filter((v) => v.key !== 'PORT').map((v) => [v.key, v.value] as const), ['PORT', String(port)]]);
}

/** What a deployment's release needs besides the deployment: installation-wide settings. */
export interface ReleaseSettings {
  readonly instanceId: string;
  readonly defaultMemoryBytes: number;
  readonly defaultNanoCpus: number;
  readonly appPidsLimit: number;
  /** The IPv4 range a release set's own network takes a /26 of. */
  readonly subnetPool?: string | undefined;
}

/**
 * The one place a release target is made: a build's image for a deployment, with the variables it
 * is released with, its volumes and its limits resolved.
 */
export function releaseTarget(
  dep: { id: string; health_check_path: string | null; memory_bytes: number | null; nano_cpus: number | null; volumes: string; replicas: number },
  build: { id: string; image: string; vars: readonly EnvVar[]; set?: ReleaseSet | null | undefined },
  settings: ReleaseSettings,
): ReleaseTarget {
  return {
    instanceId: settings.instanceId,
    deploymentId: dep.id,
    buildId: build.id,
    image: build.image,
    healthCheckPath: dep.health_check_path,
    memoryBytes: dep.memory_bytes ?? settings.defaultMemoryBytes,
    nanoCpus: dep.nano_cpus ?? settings.defaultNanoCpus,
    pidsLimit: settings.appPidsLimit,
    vars: build.vars,
    volumes: parseStoredVolumes(dep.volumes),
    replicas: dep.replicas,
    ...(build.set === null || build.set === undefined ? {} : { set: build.set }),
    ...(settings.subnetPool === undefined ? {} : { subnetPool: settings.subnetPool }),
  };
}

/** The web service of a release set: what its containers get beyond a single image's (see start-set). */
export interface WebOfSet {
  readonly port: number | null;
  readonly environment: Readonly<Record<string, string>>;
  readonly run: Partial<Pick<RunContainerOptions, 'command' | 'entrypoint' | 'workingDir' | 'user' | 'healthcheck' | 'aliasedNetwork'>>;
  readonly volumes?: RunContainerOptions['volumes'];
}

/** The marker line before the app's own output in a build log (the CLI finds it there). */
export const APP_OUTPUT_MARKER = '==> app output:';

export { immediateTurn, type EngineTurn, type ReleaseTarget };

/**
 * Runs `target.image` as a new container (one replica, whatever `target.replicas`) and waits until it answers, at the upstream the engine
 * gives, HTTP (2xx/3xx on the health-check path when one is set) within `timeoutMs`. The container's
 * output goes to `onOutput` as it comes, once, in order, with a progress line every 10 s of
 * waiting. On failure or abort the container is removed; failures throw ReleaseError ending with
 * the app's last output line. The engine calls up to the start run in `engineTurn`; the wait does not.
 */
export async function startReplica(
  engine: ContainerEngine,
  target: ReleaseTarget,
  options: { timeoutMs: number; signal: AbortSignal; onOutput?: (text: string) => void; engineTurn?: EngineTurn; web?: WebOfSet },
): Promise<ContainerInfo & { upstream: Upstream }> {
  const say = options.onOutput ?? ((): void => undefined);
  // On trial, the engine does not restart the app: a crash is reported from the first run's output alone.
  const onTrial = engine.keepRestarting !== undefined;
  const { port, container } = await (options.engineTurn ?? immediateTurn)(() => runTarget(engine, target, say, onTrial, options.web));
  const output = new OutputCopy(engine, container.id, say, options.signal);
  try {
    const healthy = await waitHealthy(engine, container, {
      port,
      healthPath: target.healthCheckPath,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
      say,
      announcedPort: () => wrongAnnouncedPort(output.text, port),
    });
    // Healthy: from now on a crash is the engine's to restart (the live-container watcher follows it).
    if (onTrial) await engine.keepRestarting?.(container.id);
    output.stop();
    say(`==> the app answers on port ${port} (${healthy.upstream.host}:${healthy.upstream.port})\n`);
    return healthy;
  } catch (err) {
    // The app's last words: what the copy saw, or (when it saw nothing) what the engine kept.
    await output.settle();
    let last = lastLine(output.text);
    if (output.text === '') {
      const kept = await lastOutput(engine, container.id);
      if (kept !== '') say(`${APP_OUTPUT_MARKER}\n${kept}\n`);
      last = lastLine(kept);
    }
    // On trial the container ran once: its stamped lines give the last one with stdout and stderr in order.
    if (onTrial && engine.containerOutput !== undefined) {
      const lines = await engine.containerOutput(container.id, AbortSignal.timeout(5000)).catch(() => []);
      if (lines.length > 0) last = lastWords(lines);
    }
    await engine.removeContainer(container.id).catch(() => undefined);
    if (err instanceof ReleaseError) throw new ReleaseError(err.reason, last);
    throw err;
  }
}

/** The engine's part of a release: the app's port, the network and volumes, the container created and started. */
async function runTarget(
  engine: ContainerEngine,
  target: ReleaseTarget,
  say: (text: string) => void,
  onTrial: boolean,
  web: WebOfSet | undefined,
): Promise<{ port: number; container: ContainerInfo }> {
  const port = web?.port ?? (await appPort(engine, target.image));
  say(`==> starting the app: it must answer HTTP on port ${port} (the PORT environment variable)\n`);
  const network = appNetworkName(target.instanceId);
  await engine.ensureNetwork({
    name: network,
    labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId },
    isolated: true,
    confined: true,
  });
  const volumes = await prepareVolumes(engine, target.instanceId, target.deploymentId, target.volumes);
  const container = await engine.runContainer({
    image: target.image,
    // A build can be released more than once (restart, rollback): names must not collide.
    name: `${containerName(target.deploymentId, target.buildId)}-${crypto.randomBytes(3).toString('hex')}`,
    labels: {
      [LABEL_MANAGED]: 'true',
      [LABEL_INSTANCE]: target.instanceId,
      [LABEL_DEPLOYMENT]: target.deploymentId,
      [LABEL_BUILD]: target.buildId,
    },
    env: web === undefined ? releaseEnv(target.vars, port) : { ...web.environment, ...releaseEnv(target.vars, port) },
    containerPort: port,
    memoryBytes: target.memoryBytes,
    nanoCpus: target.nanoCpus,
    pidsLimit: target.pidsLimit,
    network,
    volumes,
    ...(target.networks === undefined ? {} : { extraNetworks: target.networks }),
    restartOnCrash: !onTrial,
    ...web?.run,
    ...(web?.volumes === undefined ? {} : { volumes: [...volumes, ...web.volumes] }),
  });
  return { port, container };
}

/** The last non-empty line of `text`, trimmed to 500 characters. */
export function lastLine(text: string): string {
  const lines = text.split('\n').map((line) => line.trim()).filter((line) => line !== '');
  return (lines.at(-1) ?? '').slice(0, 500);
}

/**
 * Copies a starting container's output to the build log as it arrives, behind one marker line.
 * The engine ends the stream when the container exits (a restart is not followed: its output
 * would repeat the first run's). Keeps the last 16 KiB for the failure message.
 */
class OutputCopy {
  text = '';
  readonly #done: Promise<void>;
  readonly #controller = new AbortController();

  constructor(engine: ContainerEngine, id: string, say: (text: string) => void, signal: AbortSignal) {
    const stop = AbortSignal.any([signal, this.#controller.signal]);
    this.#done = (async () => {
      try {
        for await (const chunk of engine.containerLogs(id, { follow: true, signal: stop })) {
          if (this.text === '') say(`${APP_OUTPUT_MARKER}\n`);
          this.text = (this.text + chunk).slice(-16_384);
          say(chunk);
        }
      } catch {
        // The output is a help, not the outcome: a broken stream leaves the fallback (lastOutput).
      }
      if (this.text !== '' && !this.text.endsWith('\n')) say('\n');
    })();
  }

  stop(): void {
    this.#controller.abort();
  }

  /** Waits (at most 2 s) for the output of an exited container to be read to its end. */
  async settle(): Promise<void> {
    const timer = setTimeout(() => this.#controller.abort(), 2000);
    try {
      await this.#done;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The health check's polls: 20 ms after the first look, then each wait 1.5 times the last, up to
 * 200 ms (an app that listens after 1 s is seen after ~10 polls, within ~200 ms of listening).
 */
const POLL_FIRST_MS = 20;
const POLL_GROWTH = 1.5;
const POLL_MAX_MS = 200;

/** How long PORT may stay silent after the app announced another port before the start fails. */
const WRONG_PORT_GRACE_MS = 3000;

/** Seconds between "still waiting" lines while an app does not answer. */
const PROGRESS_EVERY_MS = 10_000;

/**
 * Waits until `started` (as the engine reported it right after its start) answers HTTP at the upstream the engine gives (2xx/3xx on `healthPath` when
 * set) within `timeoutMs`; throws ReleaseError when it exits first or does not answer in time.
 */
export async function waitHealthy(
  engine: ContainerEngine,
  started: ContainerInfo,
  options: {
    port: number;
    healthPath: string | null;
    timeoutMs: number;
    signal: AbortSignal;
    say?: (text: string) => void;
    /** Another port than PORT the app's output says it listens on, if any: the wait ends early when it keeps not answering. */
    announcedPort?: () => number | undefined;
  },
): Promise<ContainerInfo & { upstream: Upstream }> {
  const { port, healthPath, timeoutMs, signal } = options;
  const say = options.say ?? ((): void => undefined);
  const since = Date.now();
  const deadline = since + timeoutMs;
  let nextProgress = since + 5000;
  let lastProblem = `no answer on port ${port}`;
  let pollDelayMs = POLL_FIRST_MS;
  let wrongSince: number | undefined;
  // `started` was read from the engine just now: the first look uses it (one engine call less per release).
  let known: ContainerInfo | null = started.running && started.upstream !== null ? started : null;
  for (;;) {
    signal.throwIfAborted();
    const info = known ?? (await engine.inspectContainer(started.id));
    known = null;
    if (info === null) throw new ReleaseError('the container disappeared while starting');
    // 'restarting' means it exited and the restart policy is bringing it back: a failed start.
    if (!info.running && info.state !== 'created') {
      throw new ReleaseError(`the app exited with code ${info.exitCode ?? 'unknown'} before answering on port ${port}`);
    }
    if (info.running && info.upstream !== null) {
      // The engine's port proxy accepts connections even before the app listens, so a TCP connect
      // proves nothing: an HTTP answer from the app does.
      const status = await probe(info.upstream, healthPath ?? '/', signal);
      if (status !== null && (healthPath === null || (status >= 200 && status < 400))) {
        return { ...info, upstream: info.upstream };
      }
      lastProblem = status === null ? `no HTTP answer on port ${port}` : `${healthPath ?? '/'} answered ${status}`;
    }
    const now = Date.now();
    // The app said it listens elsewhere and PORT still has no answer a moment later: no need to wait out the timeout.
    const announced = options.announcedPort?.();
    if (announced === undefined || lastProblem !== `no HTTP answer on port ${port}`) wrongSince = undefined;
    else if (now - (wrongSince ??= now) >= WRONG_PORT_GRACE_MS) throw new ReleaseError(wrongPortReason(announced, port));
    if (now >= deadline) {
      const seconds = Math.round(timeoutMs / 1000);
      throw new ReleaseError(
        lastProblem.startsWith('no ')
          ? `the app did not answer HTTP on port ${port} (its PORT) within ${seconds} s: make it listen on the port in the PORT environment variable`
          : `the app did not become healthy within ${seconds} s (${lastProblem})`,
      );
    }
    if (now >= nextProgress) {
      say(`==> still waiting for the app to answer on port ${port} (its PORT): ${lastProblem} after ${Math.round((now - since) / 1000)} s of ${Math.round(timeoutMs / 1000)} s\n`);
      nextProgress = now + PROGRESS_EVERY_MS;
    }
    // Poll briskly at first (most apps listen within a second), then back off: many apps waiting at
    // once (a recovery) must not flood the engine's port proxies with connection attempts.
    await sleep(pollDelayMs, undefined, { signal });
    pollDelayMs = Math.min(POLL_MAX_MS, Math.round(pollDelayMs * POLL_GROWTH));
  }
}

/** One HTTP GET to the upstream; the status, or null when there is no HTTP answer within 2 s. */
function probe(upstream: Upstream, path: string, signal: AbortSignal): Promise<number | null> {
  return new Promise((resolve) => {
    const req = http.get(
      { host: upstream.host, port: upstream.port, path, agent: false, timeout: 2000, signal, headers: { 'user-agent': 'slipway-health-check' } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? null);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

/** The last lines a container printed (for error messages); empty when unavailable. */
export async function lastOutput(engine: ContainerEngine, containerId: string, lines = 30): Promise<string> {
  try {
    let text = '';
    for await (const chunk of engine.containerLogs(containerId, { tail: lines, follow: false, signal: AbortSignal.timeout(5000) })) {
      text += chunk;
      if (text.length > 16_384) text = text.slice(-16_384);
    }
    return text.trimEnd();
  } catch {
    return '';
  }
}
