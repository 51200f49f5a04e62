// A long-lived service (a managed database) as a Swarm service (Engine API 1.41): one task pinned to the node holding its volume, on its own overlay network, published nowhere.
import type { ServiceSpec as HostedSpec } from '../service.js';
import { serviceLabels } from '../service.js';
import { PROBE_TARGET, type ServiceSpec } from './swarm-service.js';

const SECOND_NS = 1_000_000_000;

/** A hosted service's Swarm service name: the installation's and the service's, like its network's. */
export const pinnedServiceName = (instanceId: string, serviceId: string): string =>
  `slipway-${instanceId.slice(0, 8)}-svc-${serviceId.toLowerCase().replace(/[^a-z0-9]/g, '').slice(0, 12) || 'x'}`;

export interface PinnedInputs {
  readonly spec: HostedSpec;
  /** The image by its local id (`sha256:…`): the node runs exactly what it holds and never pulls. */
  readonly imageId: string;
  /** The node whose engine holds the volume. */
  readonly nodeId: string;
  /** The service's overlay network (its id or name). */
  readonly network: string;
  readonly volume: string;
  /** A static busybox on the node, mounted read-only: `slipway db connect` relays through its `nc`. */
  readonly probeSource: string;
  readonly forceUpdate: number;
}

/**
 * The spec: one replica constrained to `node.id==<nodeId>` (the volume is local to it), stop-first
 * updates (two servers never share one data directory), restart on any exit, dnsrr (no IPVS) with
 * no published port, answering to its aliases on its own network only.
 */
export function pinnedServiceSpec(inputs: PinnedInputs): ServiceSpec {
  const { spec } = inputs;
  const labels = serviceLabels(spec.instanceId, spec.serviceId);
  return {
    Name: pinnedServiceName(spec.instanceId, spec.serviceId),
    Labels: labels,
    TaskTemplate: {
      ContainerSpec: {
        Image: inputs.imageId,
        // The task's container carries the service's labels: the engine finds it as it finds a docker-runtime one.
        Labels: labels,
        // Args replaces the image's CMD and keeps its entrypoint, as a container's command does.
        ...(spec.command === undefined ? {} : { Args: [...spec.command] }),
        Env: Object.entries(spec.env).map(([key, value]) => `${key}=${value}`),
        CapabilityDrop: ['ALL'],
        CapabilityAdd: [...spec.capabilities],
        StopGracePeriod: 30 * SECOND_NS,
        Mounts: [
          { Type: 'volume', Source: inputs.volume, Target: spec.dataDir, ReadOnly: false },
          { Type: 'bind', Source: inputs.probeSource, Target: PROBE_TARGET, ReadOnly: true },
        ],
      },
      Resources: { Limits: { NanoCPUs: spec.nanoCpus, MemoryBytes: spec.memoryBytes, Pids: spec.pidsLimit } },
      RestartPolicy: { Condition: 'any', Delay: SECOND_NS, MaxAttempts: 0 },
      Placement: { Constraints: [`node.id==${inputs.nodeId}`] },
      LogDriver: { Name: 'json-file', Options: { 'max-size': '10m', 'max-file': '3' } },
      Networks: [{ Target: inputs.network, Aliases: [...spec.aliases] }],
      ForceUpdate: inputs.forceUpdate,
    },
    Mode: { Replicated: { Replicas: 1 } },
    UpdateConfig: { Parallelism: 1, Delay: 0, FailureAction: 'pause', Monitor: 5 * SECOND_NS, MaxFailureRatio: 0, Order: 'stop-first' },
    EndpointSpec: { Mode: 'dnsrr' },
  };
}
