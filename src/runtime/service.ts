// A long-lived service on the engine (a managed database): one container with a named volume, on an internal network of its own, published nowhere and routed by nothing.
import crypto from 'node:crypto';
import type { ContainerEngine, ContainerInfo } from './engine.js';

/** The service (a managed database's id) an object belongs to. Not LABEL_MANAGED: the apps' sweeps of strays never touch a service. */
export const LABEL_SERVICE = 'dev.slipway.service';
/** The installation a service's objects belong to. */
export const LABEL_SERVICE_OF = 'dev.slipway.service-of';

const short = (id: string): string => id.toLowerCase().replace(/[^a-z0-9]/g, '').slice(0, 12) || 'x';

/** The service's own network: internal (no route out), its containers and those of the apps linked to it on it. */
export const serviceNetworkName = (instanceId: string, serviceId: string): string => `slipway-${instanceId.slice(0, 8)}-svc-${short(serviceId)}`;
/** The named volume that holds the service's data. */
export const serviceVolumeName = (instanceId: string, serviceId: string): string => `slipway-${instanceId.slice(0, 8)}-svc-${serviceId}`;

export const serviceLabels = (instanceId: string, serviceId: string): Record<string, string> => ({ [LABEL_SERVICE]: serviceId, [LABEL_SERVICE_OF]: instanceId });

export interface ServiceSpec {
  readonly instanceId: string;
  readonly serviceId: string;
  readonly image: string;
  readonly env: Record<string, string>;
  readonly command: readonly string[] | undefined;
  /** The port it listens on, on its network only. */
  readonly port: number;
  /** Where the volume is mounted. */
  readonly dataDir: string;
  /** Host names it answers to on its network. */
  readonly aliases: readonly string[];
  readonly memoryBytes: number;
  readonly nanoCpus: number;
  readonly pidsLimit: number;
  readonly capabilities: readonly string[];
}

/** Creates the service's network (internal, confined like the apps') unless it exists. */
export async function ensureServiceNetwork(engine: ContainerEngine, instanceId: string, serviceId: string): Promise<string> {
  const name = serviceNetworkName(instanceId, serviceId);
  await engine.ensureNetwork({ name, labels: serviceLabels(instanceId, serviceId), isolated: false, internal: true, confined: true });
  return name;
}

/**
 * Runs the service: its network and volume made if needed (the volume keeps its data), any earlier
 * container removed, a new one created and started, published on no host port.
 */
export async function runService(engine: ContainerEngine, spec: ServiceSpec): Promise<ContainerInfo> {
  const labels = serviceLabels(spec.instanceId, spec.serviceId);
  const network = await ensureServiceNetwork(engine, spec.instanceId, spec.serviceId);
  const volume = serviceVolumeName(spec.instanceId, spec.serviceId);
  await engine.ensureVolume({ name: volume, labels });
  for (const old of await engine.listContainers(labels)) await engine.removeContainer(old.id);
  return engine.runContainer({
    image: spec.image,
    name: `slipway-svc-${short(spec.serviceId)}-${crypto.randomBytes(3).toString('hex')}`,
    labels,
    env: spec.env,
    ...(spec.command === undefined ? {} : { command: spec.command }),
    containerPort: spec.port,
    publish: false,
    memoryBytes: spec.memoryBytes,
    nanoCpus: spec.nanoCpus,
    pidsLimit: spec.pidsLimit,
    network,
    networkAliases: spec.aliases,
    volumes: [{ source: volume, target: spec.dataDir }],
    capabilities: spec.capabilities,
  });
}

/** The service's container, if one exists. */
export async function serviceContainer(engine: ContainerEngine, instanceId: string, serviceId: string): Promise<ContainerInfo | undefined> {
  return (await engine.listContainers(serviceLabels(instanceId, serviceId)))[0];
}

/** Removes the service's containers, network and (unless kept) volume with its data. Containers of others on the network must be detached first. */
export async function removeService(engine: ContainerEngine, instanceId: string, serviceId: string): Promise<void> {
  const labels = serviceLabels(instanceId, serviceId);
  for (const container of await engine.listContainers(labels)) await engine.removeContainer(container.id);
  await engine.removeNetwork(serviceNetworkName(instanceId, serviceId));
  await engine.removeVolume(serviceVolumeName(instanceId, serviceId));
}
