// Starting a release: run a build's image beside the old one and wait until it is healthy.
import crypto from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ContainerEngine, ContainerInfo } from '../runtime/engine.js';
import { LABEL_BUILD, LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, appNetworkName, containerName } from '../runtime/engine.js';

/** The port an app listens on: the image's single EXPOSEd port, else 8080 (decisions §5). */
export async function appPort(engine: ContainerEngine, image: string): Promise<number> {
  const ports = await engine.imageExposedPorts(image);
  return ports.length === 1 && ports[0] !== undefined ? ports[0] : 8080;
}

/** A release that did not become healthy; the message carries the container's last output. */
export class ReleaseError extends Error {
  override readonly name = 'ReleaseError';
}

export interface ReleaseTarget {
  /** The installation's id, labelled on the container. */
  readonly instanceId: string;
  readonly deploymentId: string;
  readonly buildId: string;
  readonly image: string;
  readonly healthCheckPath: string | null;
  readonly memoryBytes: number;
  readonly nanoCpus: number;
  readonly pidsLimit: number;
}

/**
 * Runs `target.image` as a new container (port published on 127.0.0.1) and waits until it answers
 * HTTP (2xx/3xx on the health-check path when one is set) within `timeoutMs`. On failure or abort
 * the container is removed; failures throw ReleaseError with the container's last output lines.
 */
export async function startRelease(
  engine: ContainerEngine,
  target: ReleaseTarget,
  options: { timeoutMs: number; signal: AbortSignal; onOutput?: (text: string) => void },
): Promise<ContainerInfo> {
  const port = await appPort(engine, target.image);
  options.onOutput?.(`==> starting container (PORT=${port})\n`);
  const network = appNetworkName(target.instanceId);
  await engine.ensureNetwork({
    name: network,
    labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId },
    isolated: true,
  });
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
    env: { PORT: String(port) },
    containerPort: port,
    memoryBytes: target.memoryBytes,
    nanoCpus: target.nanoCpus,
    pidsLimit: target.pidsLimit,
    network,
  });
  try {
    const healthy = await waitHealthy(engine, container, target.healthCheckPath, options.timeoutMs, options.signal);
    options.onOutput?.(`==> container healthy on 127.0.0.1:${healthy.hostPort}\n`);
    return healthy;
  } catch (err) {
    const output = await lastOutput(engine, container.id);
    await engine.removeContainer(container.id).catch(() => undefined);
    if (err instanceof ReleaseError) {
      throw new ReleaseError(`${err.message}${output === '' ? '' : `\n--- last container output ---\n${output}`}`);
    }
    throw err;
  }
}

async function waitHealthy(
  engine: ContainerEngine,
  started: ContainerInfo,
  healthPath: string | null,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ContainerInfo & { hostPort: number }> {
  const since = Date.now();
  const deadline = since + timeoutMs;
  let lastProblem = 'no answer yet';
  for (;;) {
    signal.throwIfAborted();
    const info = await engine.inspectContainer(started.id);
    if (info === null) throw new ReleaseError('the container disappeared while starting');
    // 'restarting' means it exited and the restart policy is bringing it back: a failed start.
    if (!info.running && info.state !== 'created') {
      throw new ReleaseError(`the container exited with code ${info.exitCode ?? 'unknown'} before becoming healthy`);
    }
    if (info.running && info.hostPort !== null) {
      // The engine's port proxy accepts connections even before the app listens, so a TCP connect
      // proves nothing: an HTTP answer from the app does.
      const status = await probe(info.hostPort, healthPath ?? '/', signal);
      if (status !== null && (healthPath === null || (status >= 200 && status < 400))) {
        return { ...info, hostPort: info.hostPort };
      }
      lastProblem = status === null ? 'the app does not answer HTTP' : `${healthPath ?? '/'} answered ${status}`;
    }
    if (Date.now() >= deadline) {
      throw new ReleaseError(`the app did not become healthy within ${Math.round(timeoutMs / 1000)} s (${lastProblem})`);
    }
    // Poll briskly at first (most apps listen within a second), then back off.
    await sleep(Date.now() < since + 3000 ? 20 : 200, undefined, { signal });
  }
}

/** One HTTP GET to 127.0.0.1:port; the status, or null when there is no HTTP answer within 2 s. */
function probe(port: number, path: string, signal: AbortSignal): Promise<number | null> {
  return new Promise((resolve) => {
    const req = http.get(
      { host: '127.0.0.1', port, path, agent: false, timeout: 2000, signal, headers: { 'user-agent': 'slipway-health-check' } },
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
