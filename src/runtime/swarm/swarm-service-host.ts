// Managed databases under swarm (decisions §19): each one a Swarm service of one task pinned to the manager's node, where its volume is; reached over its overlay network.
import { Duplex, PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type Dockerode from 'dockerode';
import type { ContainerEngine, ContainerInfo } from '../engine.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED } from '../engine.js';
import type { ServiceDialer, ServiceHost } from '../service-host.js';
import { serviceContainer, serviceLabels, serviceNetworkName, serviceVolumeName, type ServiceSpec as HostedSpec } from '../service.js';
import { statusCode } from '../docker/engine-calls.js';
import { pinnedServiceName, pinnedServiceSpec } from './pinned-service-spec.js';
import { companionsOf } from './swarm-set.js';
import { PROBE_TARGET, updateAtVersion, type ServiceSpec, type SwarmService, type SwarmTask } from './swarm-service.js';

const POLL_MS = 500;
/** How long the service's task may take to run (the image is local: no pull). */
const START_TIMEOUT_MS = 120_000;
/** How long a task may wait with "no suitable node" before the start is given up. */
const UNPLACEABLE_MS = 10_000;

/** A task as read here: its spec's force-update counter tells which update it belongs to. */
type Task = SwarmTask & { Spec?: { ForceUpdate?: number } };

/**
 * Services on the swarm whose manager `docker` is, each pinned to the node holding its volume:
 * the manager's own when it is first created (so `engine`, the manager's engine, execs into it,
 * dumps it and restores it as under `docker`), and wherever its constraint says after that.
 */
export class SwarmServiceHost implements ServiceHost {
  readonly #docker: Dockerode;
  readonly #engine: ContainerEngine;
  readonly #probePath: string;
  #localNode = '';

  constructor(docker: Dockerode, engine: ContainerEngine, options: { readonly probePath: string }) {
    this.#docker = docker;
    this.#engine = engine;
    this.#probePath = options.probePath;
  }

  async run(spec: HostedSpec): Promise<ContainerInfo> {
    const labels = serviceLabels(spec.instanceId, spec.serviceId);
    const network = await this.network(spec.instanceId, spec.serviceId);
    const volume = serviceVolumeName(spec.instanceId, spec.serviceId);
    const existing = await this.#service(spec.instanceId, spec.serviceId);
    const pinned = existing?.Spec?.TaskTemplate?.Placement?.Constraints?.find((c) => c.startsWith('node.id=='))?.slice('node.id=='.length);
    const nodeId = pinned ?? (await this.#localNodeId());
    if (nodeId === (await this.#localNodeId())) await this.#engine.ensureVolume({ name: volume, labels });
    const image = (await this.#docker.getImage(spec.image).inspect()) as { Id: string };
    const forceUpdate = (existing?.Spec?.TaskTemplate?.ForceUpdate ?? 0) + 1;
    const body = pinnedServiceSpec({ spec, imageId: image.Id, nodeId, network, volume, probeSource: this.#probePath, forceUpdate });
    let serviceId: string;
    if (existing === undefined) {
      const created = (await this.#docker.createService(body as unknown as Dockerode.CreateServiceOptions)) as { id?: string; ID?: string };
      serviceId = created.id ?? created.ID ?? '';
    } else {
      serviceId = existing.ID;
      await this.#update(serviceId, () => body);
    }
    return this.#waitRunning(serviceId, forceUpdate, labels);
  }

  container(instanceId: string, serviceId: string): Promise<ContainerInfo | undefined> {
    return serviceContainer(this.#engine, instanceId, serviceId);
  }

  async stop(instanceId: string, serviceId: string, timeoutSeconds: number): Promise<void> {
    const service = await this.#service(instanceId, serviceId);
    if (service === undefined) return;
    if ((service.Spec?.Mode?.Replicated?.Replicas ?? 0) !== 0) await this.#update(service.ID, (spec) => ({ ...spec, Mode: { Replicated: { Replicas: 0 } } }));
    const deadline = Date.now() + (timeoutSeconds + 30) * 1000;
    while (Date.now() < deadline) {
      const tasks = (await this.#docker.listTasks({ filters: { service: [service.ID] } })) as Task[];
      if (!tasks.some((t) => ['running', 'starting', 'preparing', 'assigned', 'accepted'].includes(t.Status?.State ?? ''))) return;
      await sleep(POLL_MS);
    }
  }

  async remove(instanceId: string, serviceId: string): Promise<void> {
    const service = await this.#service(instanceId, serviceId);
    if (service !== undefined) {
      await this.#docker.getService(service.ID).remove().catch((err: unknown) => {
        if (statusCode(err) !== 404) throw err;
      });
    }
    // Swarm removes the task's containers after the service: the volume can go once they are gone.
    const labels = serviceLabels(instanceId, serviceId);
    const deadline = Date.now() + 60_000;
    while ((await this.#engine.listContainers(labels)).length > 0 && Date.now() < deadline) await sleep(POLL_MS);
    const network = serviceNetworkName(instanceId, serviceId);
    // An app just unlinked may still be rolling its tasks off the network (start-first, one at a time).
    for (let attempt = 0; attempt < 60; attempt++) {
      try {
        await this.#docker.getNetwork(network).remove();
        break;
      } catch (err) {
        if (statusCode(err) === 404) break;
      }
      await sleep(1000);
    }
    await this.#engine.removeVolume(serviceVolumeName(instanceId, serviceId));
  }

  async network(instanceId: string, serviceId: string): Promise<string> {
    const name = serviceNetworkName(instanceId, serviceId);
    if ((await this.#networkId(name)) !== undefined) return name;
    try {
      // Internal: no route out. Not attachable: only the services of the apps linked to it join it.
      await this.#docker.createNetwork({ Name: name, Driver: 'overlay', Internal: true, Attachable: false, CheckDuplicate: true, Labels: serviceLabels(instanceId, serviceId) });
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
    }
    return name;
  }

  async detach(instanceId: string, serviceId: string, deploymentIds: readonly string[]): Promise<void> {
    const name = serviceNetworkName(instanceId, serviceId);
    const id = await this.#networkId(name);
    if (id === undefined) return;
    for (const deploymentId of deploymentIds) {
      const services = [
        ...((await this.#docker.listServices({ filters: { label: [`${LABEL_MANAGED}=true`, `${LABEL_INSTANCE}=${instanceId}`, `${LABEL_DEPLOYMENT}=${deploymentId}`] } })) as SwarmService[]),
        // A compose set's other services.
        ...(await companionsOf(this.#docker, instanceId, deploymentId)),
      ];
      for (const service of services) {
        const joined = (service.Spec?.TaskTemplate?.['Networks'] as Array<{ Target?: string }> | undefined) ?? [];
        if (!joined.some((n) => n.Target === id || n.Target === name)) continue;
        // Swarm rolls the app's tasks over to the new spec (start-first): it keeps serving while it leaves.
        await this.#update(service.ID, (spec) => ({
          ...spec,
          TaskTemplate: { ...spec.TaskTemplate, Networks: joined.filter((n) => n.Target !== id && n.Target !== name) },
        }));
      }
    }
  }

  async dialer(instanceId: string, serviceId: string, port: number): Promise<ServiceDialer | null> {
    const container = await serviceContainer(this.#engine, instanceId, serviceId);
    const execStream = this.#engine.execStream?.bind(this.#engine);
    if (container === undefined || !container.running || execStream === undefined) return null;
    // The overlay network is not reachable from the control plane's host: each connection is
    // relayed by busybox's nc inside the service's container, to its port on its loopback.
    return (): Duplex => {
      const input = new PassThrough();
      const output = new PassThrough();
      const stop = new AbortController();
      const relay = Duplex.from({ readable: output, writable: input });
      relay.once('close', () => stop.abort());
      execStream(container.id, [PROBE_TARGET, 'nc', '127.0.0.1', String(port)], { stdin: input, signal: stop.signal }).then(
        ({ stdout, done }) => {
          stdout.on('error', (err) => relay.destroy(err));
          stdout.pipe(output);
          done.catch((err: unknown) => relay.destroy(err instanceof Error ? err : new Error(String(err))));
        },
        (err: unknown) => relay.destroy(err instanceof Error ? err : new Error(String(err))),
      );
      return relay;
    };
  }

  // ---- internals ----

  async #service(instanceId: string, serviceId: string): Promise<SwarmService | undefined> {
    try {
      return (await this.#docker.getService(pinnedServiceName(instanceId, serviceId)).inspect()) as SwarmService;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async #networkId(name: string): Promise<string | undefined> {
    try {
      return ((await this.#docker.getNetwork(name).inspect()) as { Id: string }).Id;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async #localNodeId(): Promise<string> {
    if (this.#localNode !== '') return this.#localNode;
    const info = (await this.#docker.info()) as { Swarm?: { NodeID?: string } };
    this.#localNode = info.Swarm?.NodeID ?? '';
    return this.#localNode;
  }

  async #update(serviceId: string, change: (spec: ServiceSpec) => ServiceSpec): Promise<void> {
    await updateAtVersion(
      async () => {
        try {
          return (await this.#docker.getService(serviceId).inspect()) as SwarmService;
        } catch (err) {
          if (statusCode(err) === 404) return undefined;
          throw err;
        }
      },
      (service) => this.#docker.getService(serviceId).update({ _query: { version: service.Version?.Index ?? 0 }, _body: change(service.Spec ?? {}) } as unknown as Dockerode.ServiceSpec & { version: number }),
    );
  }

  /** Waits for the task of update `forceUpdate` to run and resolves with its container (on this engine); throws with the node's error. */
  async #waitRunning(serviceId: string, forceUpdate: number, labels: Record<string, string>): Promise<ContainerInfo> {
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      const tasks = ((await this.#docker.listTasks({ filters: { service: [serviceId] } })) as Task[]).filter((t) => (t.Spec?.ForceUpdate ?? 0) === forceUpdate);
      const running = tasks.find((t) => t.Status?.State === 'running' && (t.Status.ContainerStatus?.ContainerID ?? '') !== '');
      const containerId = running?.Status?.ContainerStatus?.ContainerID;
      if (containerId !== undefined) {
        const found = (await this.#engine.listContainers(labels)).find((c) => c.id === containerId);
        if (found !== undefined) return found;
        throw new Error(`the service runs on another node than this manager's (task ${running?.ID ?? '?'}): its volume's node must be the manager's`);
      }
      const failed = tasks.find((t) => t.Status?.State === 'failed' || t.Status?.State === 'rejected');
      if (failed !== undefined) throw new Error(`its task failed on its node: ${failed.Status?.Err ?? failed.Status?.Message ?? 'unknown error'}`);
      const stuck = tasks.find((t) => t.Status?.State === 'pending' && (t.Status.Err ?? '') !== '' && Date.now() - Date.parse(t.CreatedAt ?? '') > UNPLACEABLE_MS);
      if (stuck !== undefined) throw new Error(`its task could not be placed: ${stuck.Status?.Err ?? ''}`);
      if (Date.now() > deadline) throw new Error(`its task did not run within ${START_TIMEOUT_MS / 1000} s`);
      await sleep(POLL_MS);
    }
  }
}
