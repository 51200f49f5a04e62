// The swarm runtime: a deployment is one Swarm service whose tasks run on the swarm's nodes, reached directly at each task's node port.
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type Dockerode from 'dockerode';
import type { Upstream } from '../../core/upstream.js';
import { appPort, ReleaseError, releaseEnv } from '../release.js';
import { prepareVolumes } from '../volumes.js';
import type { AppRuntime, OneOffOptions, OneOffResult, OneOffTarget, ReleaseState, ReleaseTarget, ReplicaStats, StartedRelease, StartReleaseOptions } from '../app-runtime.js';
import type { ContainerEngine } from '../engine.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED } from '../engine.js';
import { mergeReplicaLogs } from '../replica-logs.js';
import { pushImage, registryAuth, registryRef, type RegistrySettings } from './registry-push.js';
import { deploymentNetworkName, LABEL_RELEASE, LABEL_REPLICAS, serviceSpec, servingTasks, taskRelease, updateAtVersion, type ServiceSpec, type SwarmNode, type SwarmService, type SwarmTask } from './swarm-service.js';
import { serviceLogs, taskLogs } from './swarm-logs.js';
import { NodeWarnings, readReplicaStats, type NodeEngines } from './replica-stats.js';
import { statusCode, withTimeout } from '../docker/engine-calls.js';
import { isJobService, runSwarmOneOff } from './swarm-one-off.js';
import { companionsOf, containerFields, LABEL_SET_SERVICE, releaseCompanions, removeCompanions, scaleCompanions, setMounts, type SetDeps } from './swarm-set.js';
import { webService } from '../release-set.js';
import type { ReleaseExit } from '../../domain/app-health.js';
import { historyWarning, releaseExitsOf, type ExitedTask } from './swarm-exits.js';

export interface SwarmRuntimeOptions {
  readonly registry: RegistrySettings;
  /** A static busybox on every node, mounted read-only into each task for its health check. */
  readonly probePath: string;
  /** Resolves once the registry answers (Slipway's own, restarting after a crash); none: pushed at once. */
  readonly registryReady?: (signal: AbortSignal) => Promise<void>;
  /** The other nodes' engines, for the figures of the replicas they run; none: the manager's replicas only. */
  readonly nodeEngines?: NodeEngines;
  /** Told once per node whose replicas' figures cannot be read. */
  readonly warn?: (message: string) => void;
}

/** How often a rollout is looked at. */
const POLL_MS = 500;
/** How long a task may wait with "no suitable node" before the release is given up. */
const UNPLACEABLE_MS = 10_000;
/** Time limit of one look at the swarm's tasks for crashes. */
const LOOK_TIMEOUT_MS = 15_000;
/** Beyond the start-up timeout: the pull and the rollout's steps. */
const ROLLOUT_MARGIN_MS = 60_000;

/** A release's id under `swarm`: `<service id>/<release>`. */
export function parseReleaseId(id: string): { serviceId: string; release: string } {
  const slash = id.indexOf('/');
  return slash === -1 ? { serviceId: id, release: '' } : { serviceId: id.slice(0, slash), release: id.slice(slash + 1) };
}

/** Runs releases as Swarm services on the swarm whose manager `docker` is (decisions §16). */
export class SwarmRuntime implements AppRuntime {
  readonly #docker: Dockerode;
  readonly #engine: ContainerEngine;
  readonly #options: SwarmRuntimeOptions;
  /** Nodes about to be drained: their tasks serve no more, so the edge lets them go before swarm stops them. */
  readonly #leaving = new Set<string>();
  readonly #warnings: NodeWarnings;
  #localNode = '';
  /** Whether the swarm's task history was looked at (a warning when it keeps none). */
  #historyChecked = false;

  /** Compose sets: the web service is the deployment's service, the others its companions (swarm-set.ts). */
  readonly releasesSets = true;

  constructor(docker: Dockerode, engine: ContainerEngine, options: SwarmRuntimeOptions) {
    this.#docker = docker;
    this.#engine = engine;
    this.#options = options;
    this.#warnings = new NodeWarnings(options.warn ?? ((): void => undefined));
  }

  async startRelease(target: ReleaseTarget, options: StartReleaseOptions): Promise<StartedRelease> {
    const say = options.onOutput ?? ((): void => undefined);
    const { signal } = options;
    // A compose set's web service is the deployment's service, with its own replicas and fields (src/runtime/swarm/swarm-set.ts).
    const web = target.set === undefined ? undefined : webService(target.set);
    if (web !== undefined) target = { ...target, replicas: web.replicas };
    if (target.volumes.length > 0 && target.replicas > 1) throw new ReleaseError('a deployment with volumes runs one replica (its volumes are local to one node)');
    const port = target.set?.port ?? (await appPort(this.#engine, target.image));
    const image = registryRef(this.#options.registry, target.deploymentId, target.buildId);
    say(`==> pushing the image to ${this.#options.registry.address} (${image})\n`);
    const ready = this.#options.registryReady?.(signal) ?? Promise.resolve();
    await ready.then(() => pushImage(this.#docker, target.image, image, this.#options.registry, signal)).catch((err: unknown) => {
      throw new ReleaseError(`the image could not be pushed to the registry ${this.#options.registry.address}: ${err instanceof Error ? err.message : String(err)}`);
    });
    signal.throwIfAborted();
    const existing = await this.#serviceOf(target.instanceId, target.deploymentId);
    const release = crypto.randomBytes(6).toString('hex');
    let pinnedNode: string | null = null;
    let volumes: Array<{ source: string; target: string }> = [];
    if (target.volumes.length > 0) {
      // Volumes live on one node: the one the service is pinned to already, else this manager's own.
      const constraint = existing?.Spec?.TaskTemplate?.Placement?.Constraints?.find((c) => c.startsWith('node.id=='));
      pinnedNode = constraint?.slice('node.id=='.length) ?? (await this.#localNodeId());
      volumes = await prepareVolumes(this.#engine, target.instanceId, target.deploymentId, target.volumes);
    }
    if (web !== undefined && web.volumes.length > 0) {
      const set = await setMounts(this.#setDeps(), target, web);
      volumes = [...volumes, ...set.mounts.map((m) => ({ source: String(m['Source']), target: String(m['Target']) }))];
      pinnedNode ??= existing?.Spec?.TaskTemplate?.Placement?.Constraints?.find((c) => c.startsWith('node.id=='))?.slice('node.id=='.length) ?? set.pinnedNode;
    }
    const name = existing?.Spec?.Name ?? `slipway-${crypto.createHash('sha256').update(target.instanceId).digest('hex').slice(0, 8)}-${target.deploymentId}`;
    const network = await this.#ensureNetwork(deploymentNetworkName(name), target);
    const spec = serviceSpec({
      target,
      network,
      name,
      release,
      image,
      port,
      env: web === undefined ? releaseEnv(target.vars, port) : { ...web.environment, ...releaseEnv(target.vars, port) },
      web: web === undefined ? undefined : { container: containerFields(web), alias: web.name, labels: { [LABEL_SET_SERVICE]: web.name } },
      startupTimeoutMs: options.timeoutMs,
      probeSource: this.#options.probePath,
      volumes,
      pinnedNode,
      forceUpdate: (existing?.Spec?.TaskTemplate?.ForceUpdate ?? 0) + 1,
    });
    // A set's other services first, each healthy before the next (the previous set keeps serving meanwhile).
    const companions = await releaseCompanions(this.#setDeps(), target, { webName: name, network, release, deadline: Date.now() + options.timeoutMs + ROLLOUT_MARGIN_MS, signal, say });
    const replicas = Math.max(1, target.replicas);
    say(`==> rolling out ${replicas} replica${replicas === 1 ? '' : 's'}${web === undefined ? '' : ` of service "${web.name}"`} (start-first: each new one answers its health check before an old one stops)\n`);
    let serviceId: string;
    const since = Date.now();
    try {
      if (existing === undefined) {
        const created = (await this.#docker.createService({ ...spec, authconfig: registryAuth(this.#options.registry) } as unknown as Dockerode.CreateServiceOptions)) as { id?: string; ID?: string };
        serviceId = created.id ?? created.ID ?? '';
      } else {
        serviceId = existing.ID;
        await this.#update(serviceId, () => spec);
      }
    } catch (err) {
      await companions.undo();
      throw err;
    }
    const id = `${serviceId}/${release}`;
    try {
      const upstreams = await this.#waitRollout(serviceId, release, replicas, existing !== undefined, say, {
        deadline: Date.now() + options.timeoutMs + ROLLOUT_MARGIN_MS,
        since,
        signal,
      });
      say(`==> all ${replicas} replica${replicas === 1 ? '' : 's'} answer: ${upstreams.map((u) => `${u.host}:${u.port}`).join(', ')}\n`);
      return { id, upstreams };
    } catch (err) {
      // Nothing of a failed release is left: a new service goes, an update is rolled back to what served.
      if (existing === undefined) await this.#removeService(serviceId).catch(() => undefined);
      else await this.#rollBack(serviceId, release).catch(() => undefined);
      await companions.undo();
      throw err;
    }
  }

  async resumeRelease(id: string, _check: { readonly image: string | null; readonly healthCheckPath: string | null }, options: StartReleaseOptions): Promise<StartedRelease> {
    const { serviceId, release } = parseReleaseId(id);
    const service = await this.#inspect(serviceId);
    if (service === undefined || service.Spec?.Labels?.[LABEL_RELEASE] !== release) throw new ReleaseError('the release\'s service is gone');
    const replicas = Number(service.Spec.Labels[LABEL_REPLICAS] ?? '1');
    await scaleCompanions(this.#setDeps(), service.Spec.Labels[LABEL_INSTANCE] ?? '', service.Spec.Labels[LABEL_DEPLOYMENT] ?? '', release, 'released');
    if ((service.Spec.Mode?.Replicated?.Replicas ?? 0) !== replicas) {
      await this.#update(serviceId, (spec) => ({ ...spec, Mode: { Replicated: { Replicas: replicas } } }));
    }
    const upstreams = await this.#waitRollout(serviceId, release, replicas, false, options.onOutput ?? (() => undefined), {
      deadline: Date.now() + options.timeoutMs + ROLLOUT_MARGIN_MS,
      since: Date.now(),
      signal: options.signal,
    });
    return { id, upstreams };
  }

  /** From now on (until `stay`) the tasks on `nodeId` are not among a release's upstreams. */
  leave(nodeId: string): void {
    this.#leaving.add(nodeId);
  }

  stay(nodeId: string): void {
    this.#leaving.delete(nodeId);
  }

  async inspectReleases(instanceId: string, ids: readonly string[]): Promise<Map<string, ReleaseState>> {
    const out = new Map<string, ReleaseState>();
    if (ids.length === 0) return out;
    const [services, tasks, nodes] = await Promise.all([
      this.#docker.listServices({ filters: { label: [`${LABEL_MANAGED}=true`, `${LABEL_INSTANCE}=${instanceId}`] } }) as Promise<SwarmService[]>,
      this.#docker.listTasks({ filters: { 'desired-state': ['running'] } }) as Promise<SwarmTask[]>,
      this.#nodes(),
    ]);
    const byId = new Map(services.map((s) => [s.ID, s]));
    for (const id of ids) {
      const service = byId.get(parseReleaseId(id).serviceId);
      if (service === undefined) continue;
      const replicas = Number(service.Spec?.Labels?.[LABEL_REPLICAS] ?? '1');
      const scaled = service.Spec?.Mode?.Replicated?.Replicas ?? 0;
      const own = tasks.filter((t) => t.ServiceID === service.ID);
      out.set(id, {
        id,
        replicas,
        upstreams: servingTasks(own, nodes, replicas).map((s) => s.upstream),
        // Swarm replaces a task that dies or whose node is lost; only a service scaled down by hand needs recovery.
        lost: Math.max(0, replicas - scaled),
      });
    }
    return out;
  }

  async stopRelease(id: string, timeoutSeconds: number): Promise<void> {
    const { serviceId, release } = parseReleaseId(id);
    const service = await this.#inspect(serviceId);
    // A later release took the service over: this one's tasks are already gone.
    if (service === undefined || service.Spec?.Labels?.[LABEL_RELEASE] !== release) return;
    await this.#update(serviceId, (spec) => ({ ...spec, Mode: { Replicated: { Replicas: 0 } } }));
    await scaleCompanions(this.#setDeps(), service.Spec.Labels[LABEL_INSTANCE] ?? '', service.Spec.Labels[LABEL_DEPLOYMENT] ?? '', release, 'zero');
    const deadline = Date.now() + (timeoutSeconds + 30) * 1000;
    while (Date.now() < deadline) {
      const tasks = (await this.#docker.listTasks({ filters: { service: [serviceId] } })) as SwarmTask[];
      if (!tasks.some((t) => t.Status?.State === 'running' || t.Status?.State === 'starting')) return;
      await sleep(POLL_MS);
    }
  }

  async removeRelease(id: string): Promise<void> {
    const { serviceId, release } = parseReleaseId(id);
    const service = await this.#inspect(serviceId);
    // A job's run left behind by its instance: its service goes (its task with it).
    if (isJobService(service)) return this.#removeService(serviceId);
    // A superseded release's companions that the new set no longer has (the others were updated to it).
    const labels = service?.Spec?.Labels;
    if (labels !== undefined) await removeCompanions(this.#docker, labels[LABEL_INSTANCE] ?? '', labels[LABEL_DEPLOYMENT] ?? '', release);
    if (service === undefined || service.Spec?.Labels?.[LABEL_RELEASE] !== release) return;
    await this.#removeWhole(service);
  }

  /** A job's run: a one-off service of the live release's image on the deployment's networks (src/runtime/swarm/swarm-one-off.ts). */
  async runOnce(target: OneOffTarget, options: OneOffOptions): Promise<OneOffResult> {
    const appService = await this.#serviceOf(target.instanceId, target.deploymentId);
    return runSwarmOneOff({ docker: this.#docker, engine: this.#engine, registry: this.#options.registry, appService, localNodeId: () => this.#localNodeId() }, target, options);
  }

  async removeDeployment(instanceId: string, deploymentId: string): Promise<void> {
    const service = await this.#serviceOf(instanceId, deploymentId);
    if (service !== undefined) await this.#removeWhole(service);
  }

  /** Removes a service, waits for its containers on this node, and removes its network. */
  async #removeWhole(service: SwarmService): Promise<void> {
    const serviceId = service.ID;
    const spec = service.Spec ?? {};
    await removeCompanions(this.#docker, spec.Labels?.[LABEL_INSTANCE] ?? '', spec.Labels?.[LABEL_DEPLOYMENT] ?? '');
    await this.#removeService(serviceId);
    // Swarm removes the tasks' containers after the service: wait for those on this node (where a
    // deployment with volumes runs), so its volumes can go with it.
    const labels = { [LABEL_INSTANCE]: spec.Labels?.[LABEL_INSTANCE] ?? '', [LABEL_DEPLOYMENT]: spec.Labels?.[LABEL_DEPLOYMENT] ?? '' };
    const deadline = Date.now() + 60_000;
    while ((await this.#engine.listContainers(labels)).length > 0 && Date.now() < deadline) await sleep(POLL_MS);
    // Its network goes with it (swarm may still be detaching the tasks: a few tries).
    const network = deploymentNetworkName(spec.Name ?? '');
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        await this.#docker.getNetwork(network).remove();
        return;
      } catch (err) {
        if (statusCode(err) === 404) return;
      }
      await sleep(1000);
    }
  }

  /** The deployment's overlay network, created when missing; resolves with its id. */
  async #ensureNetwork(name: string, target: ReleaseTarget): Promise<string> {
    try {
      const found = (await this.#docker.getNetwork(name).inspect()) as { Id: string };
      return found.Id;
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
    }
    try {
      const created = await this.#docker.createNetwork({
        Name: name,
        Driver: 'overlay',
        Attachable: false,
        CheckDuplicate: true,
        // Not LABEL_MANAGED: the start-up sweep of unknown managed networks is for the one engine's own.
        Labels: { [LABEL_INSTANCE]: target.instanceId, [LABEL_DEPLOYMENT]: target.deploymentId },
      });
      return created.id;
    } catch (err) {
      // Created meanwhile by another start of the same deployment.
      if (statusCode(err) !== 409) throw err;
      return ((await this.#docker.getNetwork(name).inspect()) as { Id: string }).Id;
    }
  }

  releaseLogs(id: string, options: { tail?: number | undefined; follow: boolean; signal: AbortSignal; service?: string | undefined }): AsyncIterable<string> {
    const { serviceId, release } = parseReleaseId(id);
    const docker = this.#docker;
    const nodes = (): Promise<Map<string, SwarmNode>> => this.#nodes();
    return (async function* logs(): AsyncIterable<string> {
      const service = (await docker.getService(serviceId).inspect()) as SwarmService;
      const webName = service.Spec?.Labels?.[LABEL_SET_SERVICE];
      if (webName !== undefined) {
        // A compose set: every service's lines prefixed `[service]`, merged in time order; `service` keeps one.
        const companions = (await companionsOf(docker, service.Spec?.Labels?.[LABEL_INSTANCE] ?? '', service.Spec?.Labels?.[LABEL_DEPLOYMENT] ?? '')).filter((c) => c.Spec?.Labels?.[LABEL_RELEASE] === release);
        const members = [{ id: serviceId, name: webName }, ...companions.map((c) => ({ id: c.ID, name: c.Spec?.Labels?.[LABEL_SET_SERVICE] ?? c.ID }))].filter((m) => options.service === undefined || m.name === options.service);
        const sources = members.map((m) => (o: { tail?: number | undefined; follow: boolean; signal: AbortSignal }) => serviceLogs(docker, m.id, { ...o, timestamps: true }));
        yield* mergeReplicaLogs(sources, options, members.map((m) => m.name));
        return;
      }
      const replicas = Number(service.Spec?.Labels?.[LABEL_REPLICAS] ?? '1');
      if (replicas <= 1) {
        yield* serviceLogs(docker, serviceId, options);
        return;
      }
      // Several replicas: each running task's output (read through the manager, wherever it runs), merged.
      const tasks = (await docker.listTasks({ filters: { service: [serviceId], 'desired-state': ['running'] } })) as SwarmTask[];
      const serving = servingTasks(tasks, await nodes(), 1);
      const sources = serving.map((s) => (o: { tail?: number | undefined; follow: boolean; signal: AbortSignal }) => taskLogs(docker, s.task.ID, { ...o, timestamps: true }));
      yield* mergeReplicaLogs(sources, options);
    })();
  }

  /** The crashes of live releases: one look at the installation's tasks, their history included (src/runtime/swarm/swarm-exits.ts). */
  async releaseExits(instanceId: string, ids: readonly string[], sinceMs: number, untilMs: number, signal?: AbortSignal): Promise<Map<string, ReleaseExit[]>> {
    if (ids.length === 0) return new Map();
    if (!this.#historyChecked) {
      this.#historyChecked = true;
      const swarm = (await withTimeout('inspect the swarm', LOOK_TIMEOUT_MS, (s) => (this.#docker.swarmInspect as (this: Dockerode, o: object) => Promise<unknown>).call(this.#docker, { abortSignal: s }), signal).catch(() => ({}))) as Parameters<typeof historyWarning>[0];
      const warning = historyWarning(swarm);
      if (warning !== null) this.#options.warn?.(warning);
    }
    // The label filter matches the services' labels: every app service and companion of this installation.
    const query = { filters: JSON.stringify({ label: [`${LABEL_INSTANCE}=${instanceId}`] }) };
    const tasks = (await withTimeout('list tasks', LOOK_TIMEOUT_MS, (s) => this.#docker.listTasks({ _query: query, abortSignal: s }), signal)) as ExitedTask[];
    return releaseExitsOf(tasks, ids, sinceMs, untilMs);
  }

  /** The output of the task whose exit `key` names (its id), wherever it ran, read through the manager. */
  exitLogs(key: string, options: { tail: number; signal: AbortSignal }): AsyncIterable<string> {
    return taskLogs(this.#docker, key, { tail: options.tail, follow: false, signal: options.signal });
  }

  async releaseStats(id: string, signal?: AbortSignal): Promise<ReplicaStats[]> {
    const { serviceId } = parseReleaseId(id);
    const [localNodeId, tasks, nodes] = await Promise.all([
      this.#localNodeId(),
      this.#docker.listTasks({ filters: { service: [serviceId], 'desired-state': ['running'] } }) as Promise<SwarmTask[]>,
      this.#options.nodeEngines === undefined ? new Map<string, SwarmNode>() : this.#allNodes(),
    ]);
    // The manager's engine reads the replicas it runs itself; a worker's, that worker's engine when configured (docs/swarm.md).
    const options = { localNodeId, local: this.#engine, nodeEngines: this.#options.nodeEngines, warnings: this.#warnings, ...(signal === undefined ? {} : { signal }) };
    const web = await readReplicaStats(tasks, nodes, options);
    const service = await this.#inspect(serviceId);
    const webName = service?.Spec?.Labels?.[LABEL_SET_SERVICE];
    if (webName === undefined) return web;
    // A compose set: each service's replicas, named.
    const companions = (await companionsOf(this.#docker, service?.Spec?.Labels?.[LABEL_INSTANCE] ?? '', service?.Spec?.Labels?.[LABEL_DEPLOYMENT] ?? '')).filter((c) => c.Spec?.Labels?.[LABEL_RELEASE] === parseReleaseId(id).release);
    const others = await Promise.all(
      companions.map(async (c) => {
        const own = (await this.#docker.listTasks({ filters: { service: [c.ID], 'desired-state': ['running'] } })) as SwarmTask[];
        return (await readReplicaStats(own, nodes, options)).map((s) => ({ ...s, service: c.Spec?.Labels?.[LABEL_SET_SERVICE] ?? c.ID }));
      }),
    );
    return [...web.map((s) => ({ ...s, service: webName })), ...others.flat()];
  }

  // ---- internals ----

  #setDeps(): SetDeps {
    return { docker: this.#docker, engine: this.#engine, registry: this.#options.registry, localNodeId: () => this.#localNodeId() };
  }

  async #serviceOf(instanceId: string, deploymentId: string): Promise<SwarmService | undefined> {
    const services = (await this.#docker.listServices({
      filters: { label: [`${LABEL_MANAGED}=true`, `${LABEL_INSTANCE}=${instanceId}`, `${LABEL_DEPLOYMENT}=${deploymentId}`] },
    })) as SwarmService[];
    return services[0];
  }

  async #inspect(serviceId: string): Promise<SwarmService | undefined> {
    try {
      return (await this.#docker.getService(serviceId).inspect()) as SwarmService;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  /** The swarm's nodes that may serve (a node being drained is left out). */
  async #nodes(): Promise<Map<string, SwarmNode>> {
    return new Map(((await this.#docker.listNodes()) as SwarmNode[]).filter((n) => !this.#leaving.has(n.ID)).map((n) => [n.ID, n]));
  }

  /** Every node of the swarm, drained ones too. */
  async #allNodes(): Promise<Map<string, SwarmNode>> {
    return new Map(((await this.#docker.listNodes()) as SwarmNode[]).map((n) => [n.ID, n]));
  }

  /** The manager's own node id: read once it is known (it is every metrics read's; it changes only if the engine leaves the swarm). */
  async #localNodeId(): Promise<string> {
    if (this.#localNode !== '') return this.#localNode;
    const info = (await this.#docker.info()) as { Swarm?: { NodeID?: string } };
    this.#localNode = info.Swarm?.NodeID ?? '';
    return this.#localNode;
  }

  async #removeService(serviceId: string): Promise<void> {
    try {
      await this.#docker.getService(serviceId).remove();
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
    }
  }

  /** Updates a service's spec with the version it was read at; "update out of sequence" reads it again and retries. */
  async #update(serviceId: string, change: (spec: ServiceSpec) => ServiceSpec, query: Record<string, string> = {}): Promise<void> {
    const updated = await updateAtVersion(
      () => this.#inspect(serviceId),
      (service) =>
        this.#docker.getService(serviceId).update({
          _query: { version: service.Version?.Index ?? 0, ...query },
          _body: change(service.Spec ?? {}),
          authconfig: registryAuth(this.#options.registry),
        } as unknown as Dockerode.ServiceSpec & { version: number }),
    );
    if (updated === undefined) throw new ReleaseError('the service is gone');
  }

  /** A failed update: rolled back to the previous spec unless swarm already did (it serves the previous release). */
  async #rollBack(serviceId: string, release: string): Promise<void> {
    const service = await this.#inspect(serviceId);
    if (service === undefined || service.Spec?.Labels?.[LABEL_RELEASE] !== release) return;
    // The rollback is asked with the current spec, as `docker service rollback` does.
    await this.#update(serviceId, (spec) => spec, { rollback: 'previous' });
  }

  /**
   * Waits until `replicas` tasks of `release` run (healthy: a task with a health check runs only
   * once it passes) and, for an update, swarm has finished it. Throws ReleaseError with the node's
   * error when a task fails, cannot be placed, or swarm rolls the update back.
   */
  async #waitRollout(
    serviceId: string,
    release: string,
    replicas: number,
    update: boolean,
    say: (text: string) => void,
    bounds: { deadline: number; since: number; signal: AbortSignal },
  ): Promise<Upstream[]> {
    const seen = new Set<string>();
    for (;;) {
      bounds.signal.throwIfAborted();
      const [service, tasks, nodes] = await Promise.all([
        this.#inspect(serviceId),
        this.#docker.listTasks({ filters: { service: [serviceId] } }) as Promise<SwarmTask[]>,
        this.#nodes(),
      ]);
      if (service === undefined) throw new ReleaseError('the service was removed while it started');
      const ours = tasks.filter((t) => taskRelease(t) === release);
      // Tasks that failed before this wait (a resumed release's history) say nothing about it.
      const recent = ours.filter((t) => Date.parse(t.CreatedAt ?? '') >= bounds.since - 2000);
      const failure = await this.#failure(recent, nodes, service, update);
      if (failure !== undefined) throw new ReleaseError(failure);
      const running = servingTasks(ours, nodes, replicas);
      for (const s of running) {
        if (seen.has(s.task.ID)) continue;
        seen.add(s.task.ID);
        say(`==> replica ${s.slot} runs on ${nodes.get(s.task.NodeID ?? '')?.Description?.Hostname ?? s.task.NodeID ?? '?'} (${s.upstream.host}:${s.upstream.port})\n`);
      }
      const state = service.UpdateStatus?.State;
      const settled = !update || state === undefined || state === 'completed';
      if (running.length >= replicas && settled) return running.slice(0, replicas).map((s) => s.upstream);
      if (Date.now() > bounds.deadline) throw new ReleaseError(`the release did not have ${replicas} healthy replica${replicas === 1 ? '' : 's'} in time (${running.length} answered)`);
      await sleep(POLL_MS, undefined, { signal: bounds.signal }).catch(() => undefined);
    }
  }

  /** Why a rollout failed, in the node's words, or undefined while it goes on. */
  async #failure(ours: readonly SwarmTask[], nodes: ReadonlyMap<string, SwarmNode>, service: SwarmService, update: boolean): Promise<string | undefined> {
    const where = (t: SwarmTask): string => nodes.get(t.NodeID ?? '')?.Description?.Hostname ?? 'no node';
    const failed = [...ours].filter((t) => t.Status?.State === 'failed' || t.Status?.State === 'rejected').sort((a, b) => (a.Status?.Timestamp ?? '').localeCompare(b.Status?.Timestamp ?? '')).at(-1);
    const rolledBack = update && (service.UpdateStatus?.State ?? '').startsWith('rollback');
    if (failed !== undefined || rolledBack) {
      const err = failed?.Status?.Err ?? failed?.Status?.Message ?? service.UpdateStatus?.Message ?? 'the update was rolled back';
      const last = failed === undefined ? '' : await this.#lastLine(failed.ID);
      return `a replica failed on ${failed === undefined ? 'its node' : where(failed)}: ${err}${last === '' ? '' : `; its last line: ${last}`}`;
    }
    // Pending since it was created (the scheduler keeps trying, and keeps refreshing its status time).
    const stuck = ours.find((t) => t.Status?.State === 'pending' && (t.Status.Err ?? '') !== '' && Date.now() - Date.parse(t.CreatedAt ?? '') > UNPLACEABLE_MS);
    if (stuck !== undefined) return `a replica could not be placed: ${stuck.Status?.Err ?? ''}`;
    return undefined;
  }

  /** The last line a failed task printed (read through the manager); empty when there is none. */
  async #lastLine(taskId: string): Promise<string> {
    let text = '';
    try {
      for await (const chunk of taskLogs(this.#docker, taskId, { tail: 5, follow: false, signal: AbortSignal.timeout(5000) })) text += chunk;
    } catch {
      return '';
    }
    return (text.split('\n').map((l) => l.trim()).filter((l) => l !== '').at(-1) ?? '').slice(0, 500);
  }
}
