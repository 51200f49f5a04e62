// A compose release under swarm (decisions §21): the web service is the deployment's Swarm service; every other service of the set is a companion Swarm service on the deployment's overlay network, with its deploy.replicas.
import { setTimeout as sleep } from 'node:timers/promises';
import type Dockerode from 'dockerode';
import type { ReleaseTarget } from '../app-runtime.js';
import { APP_CAPABILITIES, LABEL_BUILD, LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, type ContainerEngine } from '../engine.js';
import { ReleaseError } from '../release.js';
import type { SetHealthcheck, SetService } from '../release-set.js';
import { engineVolumeName } from '../volumes.js';
import { statusCode } from '../docker/engine-calls.js';
import { pushImage, registryAuth, registryRef, type RegistrySettings } from './registry-push.js';
import { appTaskPolicy, LABEL_RELEASE, LABEL_REPLICAS, updateAtVersion, type ServiceSpec, type SwarmService, type SwarmTask } from './swarm-service.js';

/** The deployment a companion belongs to. Not LABEL_DEPLOYMENT: the look-up of a deployment's (web) service must never find a companion. */
export const LABEL_SET_DEPLOYMENT = 'dev.slipway.set-deployment';
/** The compose service a Swarm service runs (the web one's too). */
export const LABEL_SET_SERVICE = 'dev.slipway.set-service';

const SECOND_NS = 1_000_000_000;
const MS_NS = 1_000_000;
const POLL_MS = 500;
/** How long a task may wait with "no suitable node" before the release is given up. */
const UNPLACEABLE_MS = 10_000;

const safe = (service: string): string => service.toLowerCase().replace(/[^a-z0-9_.-]/g, '-').slice(0, 30);

/** The registry's name for one service's image of a build: the build's tag with the service's name. */
export const setServiceRef = (registry: RegistrySettings, deploymentId: string, buildId: string, service: string): string =>
  `${registryRef(registry, deploymentId, buildId)}-${safe(service)}`;

/** A companion's Swarm service name: the web service's, then the compose service's. */
export const companionName = (webName: string, service: string): string => `${webName}-${safe(service).replace(/[_.]/g, '-')}`.slice(0, 63);

/** A compose health check as Swarm takes it (durations in nanoseconds). */
export function swarmHealthcheck(check: SetHealthcheck): Record<string, unknown> {
  return { Test: [...check.test], Interval: check.intervalMs * MS_NS, Timeout: check.timeoutMs * MS_NS, Retries: check.retries, StartPeriod: check.startPeriodMs * MS_NS };
}

/** A service's own ContainerSpec fields: entrypoint (`Command`), command (`Args`), user, working directory. */
export function containerFields(service: SetService): Record<string, unknown> {
  return {
    ...(service.entrypoint === undefined ? {} : { Command: [...service.entrypoint] }),
    ...(service.command === undefined ? {} : { Args: [...service.command] }),
    ...(service.user === undefined ? {} : { User: service.user }),
    ...(service.workingDir === undefined ? {} : { Dir: service.workingDir }),
  };
}

export interface CompanionInputs {
  readonly target: ReleaseTarget;
  readonly service: SetService;
  readonly name: string;
  readonly release: string;
  readonly image: string;
  /** The deployment's overlay network. */
  readonly network: string;
  readonly mounts: ReadonlyArray<Record<string, unknown>>;
  readonly pinnedNode: string | null;
  readonly forceUpdate: number;
}

/** A companion's spec: its replicas, start-first updates rolled back on failure, its own health check, dnsrr, no published port, answering to its name. */
export function companionSpec(inputs: CompanionInputs): ServiceSpec {
  const { target, service } = inputs;
  const labels = {
    [LABEL_INSTANCE]: target.instanceId,
    [LABEL_SET_DEPLOYMENT]: target.deploymentId,
    [LABEL_SET_SERVICE]: service.name,
    [LABEL_BUILD]: target.buildId,
    [LABEL_RELEASE]: inputs.release,
  };
  // The deployment's variables over the service's own environment; PORT is the web service's.
  const env = { ...service.environment, ...Object.fromEntries(target.vars.filter((v) => v.key !== 'PORT').map((v) => [v.key, v.value] as const)) };
  return {
    Name: inputs.name,
    Labels: { ...labels, [LABEL_REPLICAS]: String(service.replicas) },
    TaskTemplate: {
      ContainerSpec: {
        Image: inputs.image,
        Labels: labels,
        ...containerFields(service),
        Env: Object.entries(env).map(([key, value]) => `${key}=${value}`),
        Init: true,
        CapabilityDrop: ['ALL'],
        CapabilityAdd: [...APP_CAPABILITIES],
        StopGracePeriod: 10 * SECOND_NS,
        ...(service.healthcheck === undefined ? {} : { Healthcheck: swarmHealthcheck(service.healthcheck) }),
        Mounts: [...inputs.mounts],
      },
      ...appTaskPolicy(target, inputs.pinnedNode),
      Networks: [{ Target: inputs.network, Aliases: [service.name] }, ...(target.networks ?? []).map((n) => ({ Target: n }))],
      ForceUpdate: inputs.forceUpdate,
    },
    Mode: { Replicated: { Replicas: service.replicas } },
    UpdateConfig: { Parallelism: 1, Delay: SECOND_NS, FailureAction: 'rollback', Monitor: 5 * SECOND_NS, MaxFailureRatio: 0, Order: 'start-first' },
    RollbackConfig: { Parallelism: 1, Delay: 0, FailureAction: 'pause', Monitor: 5 * SECOND_NS, MaxFailureRatio: 0, Order: 'start-first' },
    EndpointSpec: { Mode: 'dnsrr' },
  };
}

export interface SetDeps {
  readonly docker: Dockerode;
  readonly engine: ContainerEngine;
  readonly registry: RegistrySettings;
  readonly localNodeId: () => Promise<string>;
}

/** The companions of a deployment (every release's), as the manager lists them. */
export async function companionsOf(docker: Dockerode, instanceId: string, deploymentId: string): Promise<SwarmService[]> {
  return (await docker.listServices({ filters: { label: [`${LABEL_INSTANCE}=${instanceId}`, `${LABEL_SET_DEPLOYMENT}=${deploymentId}`] } })) as SwarmService[];
}

/** A compose service's named volumes on the manager's node (the deployment's own, kept across releases), as mounts; they pin the service there. */
export async function setMounts(deps: SetDeps, target: ReleaseTarget, service: SetService): Promise<{ mounts: Array<Record<string, unknown>>; pinnedNode: string | null }> {
  if (service.volumes.length === 0) return { mounts: [], pinnedNode: null };
  const mounts: Array<Record<string, unknown>> = [];
  for (const v of service.volumes) {
    const source = engineVolumeName(target.instanceId, target.deploymentId, `compose-${v.name}`);
    // Labelled as the docker runtime labels them: the deployment's deletion removes them.
    await deps.engine.ensureVolume({ name: source, labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId, [LABEL_DEPLOYMENT]: target.deploymentId } });
    mounts.push({ Type: 'volume', Source: source, Target: v.target, ReadOnly: v.readOnly });
  }
  return { mounts, pinnedNode: await deps.localNodeId() };
}

/** What a set's companions did in a release: undone when a later service (or the web one) fails. */
export interface CompanionRollout {
  /** Rolls back the companions this release updated and removes those it created; the previous set serves as before. */
  undo(): Promise<void>;
}

/**
 * Releases every service of `target.set` but the web one, in the set's order (depends_on first),
 * each healthy (its own health check, run by swarm before the task counts as running) before the
 * next starts. Throws ReleaseError naming the service, after undoing what it did.
 */
export async function releaseCompanions(
  deps: SetDeps,
  target: ReleaseTarget,
  context: { readonly webName: string; readonly network: string; readonly release: string; readonly deadline: number; readonly signal: AbortSignal; readonly say: (text: string) => void },
): Promise<CompanionRollout> {
  const set = target.set;
  const done: Array<{ id: string; created: boolean }> = [];
  const rollout: CompanionRollout = {
    undo: async () => {
      for (const c of done.reverse()) {
        if (c.created) await removeSwarmService(deps.docker, c.id).catch(() => undefined);
        else await rollBack(deps, c.id, context.release).catch(() => undefined);
      }
    },
  };
  if (set === undefined) return rollout;
  const existing = await companionsOf(deps.docker, target.instanceId, target.deploymentId);
  try {
    for (const service of set.services) {
      if (service.name === set.web) continue;
      context.signal.throwIfAborted();
      const image = setServiceRef(deps.registry, target.deploymentId, target.buildId, service.name);
      context.say(`==> pushing the image of service "${service.name}" (${image})\n`);
      await pushImage(deps.docker, service.image, image, deps.registry, context.signal).catch((err: unknown) => {
        throw new ReleaseError(`service "${service.name}": its image could not be pushed to the registry ${deps.registry.address}: ${err instanceof Error ? err.message : String(err)}`);
      });
      const current = existing.find((s) => s.Spec?.Labels?.[LABEL_SET_SERVICE] === service.name);
      const { mounts, pinnedNode } = await setMounts(deps, target, service);
      const pinned = current?.Spec?.TaskTemplate?.Placement?.Constraints?.find((c) => c.startsWith('node.id=='))?.slice('node.id=='.length) ?? null;
      const spec = companionSpec({
        target,
        service,
        name: current?.Spec?.Name ?? companionName(context.webName, service.name),
        release: context.release,
        image,
        network: context.network,
        mounts,
        pinnedNode: pinned !== null && pinnedNode !== null ? pinned : pinnedNode,
        forceUpdate: (current?.Spec?.TaskTemplate?.ForceUpdate ?? 0) + 1,
      });
      context.say(`==> releasing service "${service.name}" (${service.replicas} replica${service.replicas === 1 ? '' : 's'}${service.healthcheck === undefined ? '' : ', healthy before the next one starts'})\n`);
      const since = Date.now();
      let id: string;
      if (current === undefined) {
        const created = (await deps.docker.createService({ ...spec, authconfig: registryAuth(deps.registry) } as unknown as Dockerode.CreateServiceOptions)) as { id?: string; ID?: string };
        id = created.id ?? created.ID ?? '';
        done.push({ id, created: true });
      } else {
        id = current.ID;
        await updateService(deps, id, () => spec);
        done.push({ id, created: false });
      }
      await waitCompanion(deps.docker, id, service, context.release, current !== undefined, { deadline: context.deadline, since, signal: context.signal });
      context.say(`==> service "${service.name}" is up${service.healthcheck === undefined ? '' : ' and healthy'}\n`);
    }
  } catch (err) {
    await rollout.undo();
    throw err;
  }
  return rollout;
}

/** Scales a release's companions: to 0 (stop), or back to the replicas each was released with (resume). */
export async function scaleCompanions(deps: SetDeps, instanceId: string, deploymentId: string, release: string, to: 'zero' | 'released'): Promise<void> {
  for (const service of await companionsOf(deps.docker, instanceId, deploymentId)) {
    if (service.Spec?.Labels?.[LABEL_RELEASE] !== release) continue;
    const replicas = to === 'zero' ? 0 : Number(service.Spec.Labels[LABEL_REPLICAS] ?? '1');
    if ((service.Spec.Mode?.Replicated?.Replicas ?? -1) === replicas) continue;
    await updateService(deps, service.ID, (spec) => ({ ...spec, Mode: { Replicated: { Replicas: replicas } } }));
  }
}

/** Removes a deployment's companions: those of `release` only, or all of them (`release` undefined). */
export async function removeCompanions(docker: Dockerode, instanceId: string, deploymentId: string, release?: string): Promise<void> {
  for (const service of await companionsOf(docker, instanceId, deploymentId)) {
    if (release !== undefined && service.Spec?.Labels?.[LABEL_RELEASE] !== release) continue;
    await removeSwarmService(docker, service.ID);
  }
}

async function removeSwarmService(docker: Dockerode, id: string): Promise<void> {
  try {
    await docker.getService(id).remove();
  } catch (err) {
    if (statusCode(err) !== 404) throw err;
  }
}

async function inspect(docker: Dockerode, id: string): Promise<SwarmService | undefined> {
  try {
    return (await docker.getService(id).inspect()) as SwarmService;
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

async function updateService(deps: SetDeps, id: string, change: (spec: ServiceSpec) => ServiceSpec, query: Record<string, string> = {}): Promise<void> {
  await updateAtVersion(
    () => inspect(deps.docker, id),
    (service) =>
      deps.docker.getService(id).update({
        _query: { version: service.Version?.Index ?? 0, ...query },
        _body: change(service.Spec ?? {}),
        authconfig: registryAuth(deps.registry),
      } as unknown as Dockerode.ServiceSpec & { version: number }),
  );
}

/** Back to the spec before `release`'s update, unless swarm already rolled it back. */
async function rollBack(deps: SetDeps, id: string, release: string): Promise<void> {
  const service = await inspect(deps.docker, id);
  if (service === undefined || service.Spec?.Labels?.[LABEL_RELEASE] !== release) return;
  await updateService(deps, id, (spec) => spec, { rollback: 'previous' });
}

/** Waits until `service.replicas` tasks of `release` run (healthy when it has a check) and an update has finished; throws ReleaseError naming the service. */
async function waitCompanion(
  docker: Dockerode,
  id: string,
  service: SetService,
  release: string,
  update: boolean,
  bounds: { deadline: number; since: number; signal: AbortSignal },
): Promise<void> {
  const named = (reason: string): ReleaseError => new ReleaseError(`service "${service.name}" ${reason}`);
  for (;;) {
    bounds.signal.throwIfAborted();
    const [current, tasks] = await Promise.all([inspect(docker, id), docker.listTasks({ filters: { service: [id] } }) as Promise<SwarmTask[]>]);
    if (current === undefined) throw named('was removed while it started');
    const ours = tasks.filter((t) => t.Spec?.ContainerSpec?.Labels?.[LABEL_RELEASE] === release);
    const recent = ours.filter((t) => Date.parse(t.CreatedAt ?? '') >= bounds.since - 2000);
    const failed = recent.find((t) => t.Status?.State === 'failed' || t.Status?.State === 'rejected');
    const state = current.UpdateStatus?.State ?? '';
    if (failed !== undefined || (update && state.startsWith('rollback'))) {
      throw named(`failed on its node: ${failed?.Status?.Err ?? failed?.Status?.Message ?? current.UpdateStatus?.Message ?? 'the update was rolled back'}${service.healthcheck === undefined ? '' : ' (its health check must pass)'}`);
    }
    const stuck = recent.find((t) => t.Status?.State === 'pending' && (t.Status.Err ?? '') !== '' && Date.now() - Date.parse(t.CreatedAt ?? '') > UNPLACEABLE_MS);
    if (stuck !== undefined) throw named(`could not be placed: ${stuck.Status?.Err ?? ''}`);
    const running = ours.filter((t) => t.DesiredState === 'running' && t.Status?.State === 'running').length;
    if (running >= service.replicas && (!update || state === '' || state === 'completed')) return;
    if (Date.now() > bounds.deadline) throw named(`did not have ${service.replicas} healthy replica${service.replicas === 1 ? '' : 's'} in time (${running} running)`);
    await sleep(POLL_MS, undefined, { signal: bounds.signal }).catch(() => undefined);
  }
}
