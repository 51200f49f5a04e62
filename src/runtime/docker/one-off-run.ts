// A one-off run on one engine: a container of a release's image with another command, run to its end (a scheduled job's run).
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OneOffOptions, OneOffResult, OneOffTarget } from '../app-runtime.js';
import type { ContainerEngine, ContainerInfo } from '../engine.js';
import { LABEL_BUILD, LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, appNetworkName, containerName } from '../engine.js';
import { appPort, releaseEnv } from '../release.js';
import { prepareVolumes } from '../volumes.js';

/** The run id on a one-off's container (the release code and the crash watcher never look at it). */
export const LABEL_JOB_RUN = 'dev.slipway.job-run';

/** How long after a kill (or after its output ended) the engine may take to report the container exited. */
const EXIT_GRACE_MS = 15_000;

/**
 * Runs `target` as one container (unpublished, no restart policy, the app's network, volumes,
 * variables and limits), copies its output to `onOutput` until it exits, kills it past
 * `timeoutMs`, and removes it. Aborting `signal` kills and removes it and rejects.
 */
export async function runOneOff(engine: ContainerEngine, target: OneOffTarget, options: OneOffOptions): Promise<OneOffResult> {
  options.signal.throwIfAborted();
  const port = await appPort(engine, target.image);
  const network = appNetworkName(target.instanceId);
  await engine.ensureNetwork({ name: network, labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId }, isolated: true, confined: true });
  const volumes = await prepareVolumes(engine, target.instanceId, target.deploymentId, target.volumes);
  const created = await engine.runContainer({
    image: target.image,
    name: `${containerName(target.deploymentId, target.runId)}-job-${crypto.randomBytes(3).toString('hex')}`,
    labels: {
      [LABEL_MANAGED]: 'true',
      [LABEL_INSTANCE]: target.instanceId,
      [LABEL_DEPLOYMENT]: target.deploymentId,
      [LABEL_BUILD]: target.buildId,
      [LABEL_JOB_RUN]: target.runId,
    },
    env: releaseEnv(target.vars, port),
    containerPort: port,
    memoryBytes: target.memoryBytes,
    nanoCpus: target.nanoCpus,
    pidsLimit: target.pidsLimit,
    network,
    volumes,
    ...(target.networks === undefined ? {} : { extraNetworks: target.networks }),
    restartOnCrash: false,
    publish: false,
    command: target.command,
    // Created ahead of its due time and started at it: the start is the only engine call left on the clock.
    start: false,
  });
  const id = created.id;
  try {
    const wait = (options.startAt ?? 0) - Date.now();
    if (wait > 0) await sleep(wait, undefined, { signal: options.signal });
    if (options.ready !== undefined && !(await options.ready())) {
      await engine.removeContainer(id).catch(() => undefined);
      return { id, exitCode: null, timedOut: false, started: false };
    }
    await engine.startContainer(id);
  } catch (err) {
    await engine.removeContainer(id).catch(() => undefined);
    throw err;
  }
  options.onStarted?.(id);
  let timedOut = false;
  const killed = new AbortController();
  const kill = (): void => {
    killed.abort();
    void engine.stopContainer(id, 0).catch(() => undefined);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, options.timeoutMs);
  const onAbort = (): void => kill();
  options.signal.addEventListener('abort', onAbort, { once: true });
  try {
    // The engine ends a followed log when the container exits.
    try {
      for await (const chunk of engine.containerLogs(id, { follow: true, signal: options.signal })) options.onOutput(chunk);
    } catch {
      // The output is a help: the exit code is the outcome, read below.
    }
    const ended = await exited(engine, id, timedOut || killed.signal.aborted ? EXIT_GRACE_MS : options.timeoutMs + EXIT_GRACE_MS, killed.signal);
    options.signal.throwIfAborted();
    return { id, exitCode: ended?.exitCode ?? null, timedOut, started: true };
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', onAbort);
    await engine.removeContainer(id).catch(() => undefined);
  }
}

/** The container once it no longer runs (null when it vanished or did not stop within `withinMs`). */
async function exited(engine: ContainerEngine, id: string, withinMs: number, killed: AbortSignal): Promise<ContainerInfo | null> {
  let deadline = Date.now() + withinMs;
  let shortened = killed.aborted;
  for (;;) {
    const info = await engine.inspectContainer(id);
    if (info === null || !info.running) return info;
    // Killed meanwhile (its timeout): the engine needs only a moment now.
    if (!shortened && killed.aborted) {
      shortened = true;
      deadline = Math.min(deadline, Date.now() + EXIT_GRACE_MS);
    }
    if (Date.now() >= deadline) return null;
    await sleep(100);
  }
}
