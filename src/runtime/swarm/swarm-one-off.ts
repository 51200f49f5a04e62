// A scheduled job's run under swarm (decisions §22): a one-off Swarm service (one task, restart condition none) of the live release's pushed image, on the deployment's overlay network.
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type Dockerode from 'dockerode';
import type { OneOffOptions, OneOffResult, OneOffTarget } from '../app-runtime.js';
import type { ContainerEngine } from '../engine.js';
import { APP_CAPABILITIES, LABEL_BUILD, LABEL_INSTANCE } from '../engine.js';
import { LABEL_JOB_RUN } from '../docker/one-off-run.js';
import { statusCode } from '../docker/engine-calls.js';
import { appPort, releaseEnv } from '../release.js';
import { prepareVolumes } from '../volumes.js';
import { registryAuth, registryRef, type RegistrySettings } from './registry-push.js';
import { serviceLogs } from './swarm-logs.js';
import { updateAtVersion, type ServiceSpec, type SwarmService, type SwarmTask } from './swarm-service.js';

/** The deployment a job's service runs for. Not LABEL_DEPLOYMENT: the runtime's look-up of a deployment's service must never find a job's. */
export const LABEL_JOB_DEPLOYMENT = 'dev.slipway.job-deployment';

const POLL_MS = 500;
/** Output still on its way from the task's node when the task is seen ended. */
const OUTPUT_GRACE_MS = 1_500;
/** How long the task may take to be placed and started (the image is pulled by its node). */
const PLACE_TIMEOUT_MS = 120_000;

type Task = SwarmTask & { Status?: SwarmTask['Status'] & { ContainerStatus?: { ContainerID?: string; ExitCode?: number } } };

export interface SwarmOneOffDeps {
  readonly docker: Dockerode;
  /** The manager's engine: the image's port and the deployment's volumes (on the manager's node). */
  readonly engine: ContainerEngine;
  readonly registry: RegistrySettings;
  /** The deployment's live service (its name, networks and node pin are the run's too); undefined when it has none. */
  readonly appService: SwarmService | undefined;
  /** The manager's node id (where a deployment with volumes runs). */
  readonly localNodeId: () => Promise<string>;
}

/**
 * Runs `target` as a Swarm service of one task that is never restarted: created with 0 replicas
 * ahead of its due time and scaled to 1 at it; its output followed through the manager; killed
 * (the service removed) past its timeout; removed at its end. The run's id is `<service id>/job`.
 */
export async function runSwarmOneOff(deps: SwarmOneOffDeps, target: OneOffTarget, options: OneOffOptions): Promise<OneOffResult> {
  const { docker } = deps;
  options.signal.throwIfAborted();
  const port = await appPort(deps.engine, target.image);
  const app = deps.appService?.Spec;
  if (app === undefined) throw new Error('the deployment has no service on the swarm: deploy it first');
  // The app's networks: its own overlay and its linked databases' (the linked-runtime wrapper names them again).
  const joined = ((app.TaskTemplate?.['Networks'] as Array<{ Target: string }> | undefined) ?? []).slice(0, 1);
  const networks = [...joined, ...(target.networks ?? []).map((n) => ({ Target: n }))];
  let constraints: string[] = [];
  let mounts: Array<Record<string, unknown>> = [];
  if (target.volumes.length > 0) {
    const pinned = app.TaskTemplate?.Placement?.Constraints?.find((c) => c.startsWith('node.id=='));
    constraints = [pinned ?? `node.id==${await deps.localNodeId()}`];
    mounts = (await prepareVolumes(deps.engine, target.instanceId, target.deploymentId, target.volumes)).map((v) => ({ Type: 'volume', Source: v.source, Target: v.target, ReadOnly: false }));
  }
  const labels = { [LABEL_INSTANCE]: target.instanceId, [LABEL_JOB_DEPLOYMENT]: target.deploymentId, [LABEL_BUILD]: target.buildId, [LABEL_JOB_RUN]: target.runId };
  const spec: ServiceSpec = {
    Name: `${app.Name ?? 'slipway'}-job-${crypto.randomBytes(4).toString('hex')}`.slice(0, 63),
    Labels: labels,
    TaskTemplate: {
      ContainerSpec: {
        Image: registryRef(deps.registry, target.deploymentId, target.buildId),
        Labels: labels,
        // Args replaces the image's CMD and keeps its entrypoint.
        Args: [...target.command],
        Env: Object.entries(releaseEnv(target.vars, port)).map(([key, value]) => `${key}=${value}`),
        Init: true,
        CapabilityDrop: ['ALL'],
        CapabilityAdd: [...APP_CAPABILITIES],
        StopGracePeriod: 0,
        Mounts: mounts,
      },
      Resources: { Limits: { NanoCPUs: target.nanoCpus, MemoryBytes: target.memoryBytes, Pids: target.pidsLimit } },
      RestartPolicy: { Condition: 'none', MaxAttempts: 0 },
      Placement: { Constraints: constraints },
      LogDriver: { Name: 'json-file', Options: { 'max-size': '10m', 'max-file': '3' } },
      Networks: networks,
    },
    // Scaled to 1 at its due time: the start is the only call left on the clock.
    Mode: { Replicated: { Replicas: 0 } },
    EndpointSpec: { Mode: 'dnsrr' },
  };
  const created = (await docker.createService({ ...spec, authconfig: registryAuth(deps.registry) } as unknown as Dockerode.CreateServiceOptions)) as { id?: string; ID?: string };
  const serviceId = created.id ?? created.ID ?? '';
  const id = `${serviceId}/job`;
  const remove = (): Promise<void> =>
    docker.getService(serviceId).remove().then(
      () => undefined,
      (err: unknown) => {
        if (statusCode(err) !== 404) throw err;
      },
    );
  try {
    const wait = (options.startAt ?? 0) - Date.now();
    if (wait > 0) await sleep(wait, undefined, { signal: options.signal });
    if (options.ready !== undefined && !(await options.ready())) {
      await remove().catch(() => undefined);
      return { id, exitCode: null, timedOut: false, started: false };
    }
    await updateAtVersion(
      async () => (await docker.getService(serviceId).inspect()) as SwarmService,
      (service) =>
        docker.getService(serviceId).update({
          _query: { version: service.Version?.Index ?? 0 },
          _body: { ...service.Spec, Mode: { Replicated: { Replicas: 1 } } },
          authconfig: registryAuth(deps.registry),
        } as unknown as Dockerode.ServiceSpec & { version: number }),
    );
  } catch (err) {
    await remove().catch(() => undefined);
    throw err;
  }
  options.onStarted?.(id);
  let timedOut = false;
  const deadline = Date.now() + options.timeoutMs;
  const following = new AbortController();
  const output = (async () => {
    try {
      for await (const chunk of serviceLogs(docker, serviceId, { follow: true, signal: AbortSignal.any([following.signal, options.signal]) })) options.onOutput(chunk);
    } catch {
      // The output is a help: the task's exit code is the outcome.
    }
  })();
  try {
    const placedBy = Date.now() + PLACE_TIMEOUT_MS;
    for (;;) {
      options.signal.throwIfAborted();
      const tasks = (await docker.listTasks({ filters: { service: [serviceId] } })) as Task[];
      const task = tasks.sort((a, b) => (a.CreatedAt ?? '').localeCompare(b.CreatedAt ?? '')).at(-1);
      const state = task?.Status?.State ?? '';
      if (state === 'complete' || state === 'failed' || state === 'rejected' || state === 'shutdown' || state === 'orphaned') {
        const code = task?.Status?.ContainerStatus?.ExitCode;
        // A task the node could not run (no such image, no suitable node) never had a container: its error is the output's last line.
        if (state === 'rejected' || (code === undefined && task?.Status?.Err !== undefined)) options.onOutput(`${task?.Status?.Err ?? task?.Status?.Message ?? 'the task could not run'}\n`);
        await sleep(OUTPUT_GRACE_MS);
        return { id, exitCode: state === 'rejected' ? null : (code ?? (state === 'complete' ? 0 : null)), timedOut, started: true };
      }
      if (Date.now() >= deadline) {
        timedOut = true;
        return { id, exitCode: null, timedOut, started: true };
      }
      const placing = state === '' || ['new', 'pending', 'assigned', 'accepted', 'preparing'].includes(state);
      if (placing && Date.now() > placedBy) {
        options.onOutput(`the run could not be started on any node: ${task?.Status?.Err ?? state}\n`);
        return { id, exitCode: null, timedOut: false, started: true };
      }
      await sleep(POLL_MS, undefined, { signal: options.signal }).catch(() => undefined);
    }
  } finally {
    following.abort();
    await output;
    // Removing the service kills a task still running (its timeout, an abort) and frees its node.
    await remove().catch(() => undefined);
  }
}

/** Whether a swarm service is a job's run (removed whole when its run is left behind). */
export const isJobService = (service: SwarmService | undefined): boolean => service?.Spec?.Labels?.[LABEL_JOB_RUN] !== undefined;
