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

/** The service a companion container or volume serves (a database's log receiver): a label of its own, so the service's own container is never mistaken for it. */
export const LABEL_COMPANION_OF = 'dev.slipway.companion-of';
export const companionLabels = (instanceId: string, serviceId: string): Record<string, string> => ({ [LABEL_COMPANION_OF]: serviceId, [LABEL_SERVICE_OF]: instanceId });

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
  /** The IPv4 range its network's /26 is taken from (SLIPWAY_DB_SUBNET_POOL). */
  readonly subnetPool: string;
}

/** Hosts a service network holds: the service and the containers of the apps linked to it (a /26). */
const SERVICE_SUBNET_PREFIX = 26;
/** Subnets tried before giving up (each taken one is skipped). */
const SUBNET_TRIES = 64;

/**
 * The `index`-th /26 of `pool` (an IPv4 CIDR of /26 or larger), counted from a start derived from
 * `serviceId` so services spread over the pool and rarely try a taken one first.
 */
export function serviceSubnet(pool: string, serviceId: string, attempt: number): string {
  const [base, bits] = pool.split('/');
  const octets = (base ?? '').split('.').map(Number);
  const prefix = Number(bits);
  const start = (((octets[0] ?? 0) << 24) | ((octets[1] ?? 0) << 16) | ((octets[2] ?? 0) << 8) | (octets[3] ?? 0)) >>> 0;
  const count = 2 ** (SERVICE_SUBNET_PREFIX - prefix);
  const first = crypto.createHash('sha256').update(serviceId).digest().readUInt32BE(0) % count;
  const address = (start + ((first + attempt) % count) * 2 ** (32 - SERVICE_SUBNET_PREFIX)) >>> 0;
  return `${[24, 16, 8, 0].map((shift) => (address >>> shift) & 255).join('.')}/${SERVICE_SUBNET_PREFIX}`;
}

/**
 * Creates the service's network unless it exists: internal, confined like the apps', on a /26 of
 * `pool` (one network per database would soon exhaust the engine's default pools of /16s and /20s).
 * `labels` default to the service's; a release set's network carries its deployment's instead.
 */
export async function ensureServiceNetwork(
  engine: ContainerEngine,
  instanceId: string,
  serviceId: string,
  pool: string,
  labels: Record<string, string> = serviceLabels(instanceId, serviceId),
): Promise<string> {
  const name = serviceNetworkName(instanceId, serviceId);
  for (let attempt = 0; ; attempt++) {
    try {
      await engine.ensureNetwork({ name, labels, isolated: false, internal: true, confined: true, subnet: serviceSubnet(pool, serviceId, attempt) });
      return name;
    } catch (err) {
      // Another network holds that subnet: the next one.
      if (attempt + 1 >= SUBNET_TRIES || !/overlap/i.test(err instanceof Error ? err.message : String(err))) throw err;
    }
  }
}

/**
 * Runs the service: its network and volume made if needed (the volume keeps its data), any earlier
 * container removed, a new one created and started, published on no host port.
 */
export async function runService(engine: ContainerEngine, spec: ServiceSpec): Promise<ContainerInfo> {
  const labels = serviceLabels(spec.instanceId, spec.serviceId);
  const network = await ensureServiceNetwork(engine, spec.instanceId, spec.serviceId, spec.subnetPool);
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

/** The service's container, if one exists: the running one first. */
export async function serviceContainer(engine: ContainerEngine, instanceId: string, serviceId: string): Promise<ContainerInfo | undefined> {
  // Under swarm a service's earlier tasks leave their stopped containers behind for a while: the running one counts.
  const containers = await engine.listContainers(serviceLabels(instanceId, serviceId));
  return containers.find((c) => c.running) ?? containers[0];
}

/** Removes the service's containers, network and (unless kept) volume with its data. Containers of others on the network must be detached first. */
export async function removeService(engine: ContainerEngine, instanceId: string, serviceId: string): Promise<void> {
  const labels = serviceLabels(instanceId, serviceId);
  const companions = companionLabels(instanceId, serviceId);
  for (const container of [...(await engine.listContainers(labels)), ...(await engine.listContainers(companions))]) await engine.removeContainer(container.id);
  for (const volume of await engine.listVolumes(companions)) await engine.removeVolume(volume.name);
  await engine.removeNetwork(serviceNetworkName(instanceId, serviceId));
  await engine.removeVolume(serviceVolumeName(instanceId, serviceId));
}
