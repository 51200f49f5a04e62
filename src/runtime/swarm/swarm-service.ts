// A release as a Swarm service (Engine API 1.41): its spec, its tasks as the runtime reads them, and which of them serve.
import type { Upstream } from '../../core/upstream.js';
import type { ReleaseTarget } from '../app-runtime.js';
import { APP_CAPABILITIES, LABEL_BUILD, LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED } from '../engine.js';

/** The label naming the release a service (and each of its tasks' containers) runs: the part of a release id after the slash. */
export const LABEL_RELEASE = 'dev.slipway.release';
/** The replicas a release was started with (a stopped release's service is scaled to 0 and keeps this). */
export const LABEL_REPLICAS = 'dev.slipway.replicas';

/** A deployment's overlay network: its tasks' only network besides the node's gateway bridge (which keeps containers apart). */
export const deploymentNetworkName = (serviceName: string): string => `${serviceName}-net`;

/** Where the health-check program is mounted in every task (a static busybox from the node; named busybox, as it picks its applet from its first argument or its own name). */
export const PROBE_TARGET = '/.slipway/busybox';

const SECOND_NS = 1_000_000_000;

/** Attempts of an update that meets "update out of sequence" (another update came first). */
const UPDATE_ATTEMPTS = 5;

/**
 * A swarm object (service, node) updated with the version it was read at (Engine API 1.41): `write`
 * gets what `read` found; "update out of sequence" reads it again and writes again (5 times at most).
 * Resolves with what was written against, or undefined when `read` finds nothing.
 */
export async function updateAtVersion<T>(read: () => Promise<T | undefined>, write: (current: T) => Promise<unknown>): Promise<T | undefined> {
  for (let attempt = 1; ; attempt++) {
    const current = await read();
    if (current === undefined) return undefined;
    try {
      await write(current);
      return current;
    } catch (err) {
      if (err instanceof Error && err.message.includes('update out of sequence') && attempt < UPDATE_ATTEMPTS) continue;
      throw err;
    }
  }
}

/** What the Engine API answers for a service (the fields read here). */
export interface SwarmService {
  ID: string;
  Version?: { Index?: number };
  Spec?: ServiceSpec;
  UpdateStatus?: { State?: string; Message?: string; StartedAt?: string };
}

/** A service spec: written whole by Slipway, read back for updates (every other field is kept as the API gave it). */
export interface ServiceSpec {
  Name?: string;
  Labels?: Record<string, string>;
  TaskTemplate?: {
    ContainerSpec?: { Image?: string; Labels?: Record<string, string>; [field: string]: unknown };
    ForceUpdate?: number;
    Placement?: { Constraints?: string[]; [field: string]: unknown };
    [field: string]: unknown;
  };
  Mode?: { Replicated?: { Replicas?: number }; Global?: Record<string, never> };
  [field: string]: unknown;
}

/** What the Engine API answers for a task. */
export interface SwarmTask {
  ID: string;
  ServiceID?: string;
  NodeID?: string;
  Slot?: number;
  CreatedAt?: string;
  DesiredState?: string;
  Spec?: { ContainerSpec?: { Labels?: Record<string, string> } };
  Status?: {
    Timestamp?: string;
    State?: string;
    Message?: string;
    Err?: string;
    ContainerStatus?: { ContainerID?: string };
    PortStatus?: { Ports?: Array<{ TargetPort?: number; PublishedPort?: number }> };
  };
}

/** What the Engine API answers for a node. */
export interface SwarmNode {
  ID: string;
  Version?: { Index?: number };
  Spec?: { Role?: string; Availability?: string; Labels?: Record<string, string>; Name?: string };
  Description?: { Hostname?: string };
  Status?: { State?: string; Addr?: string };
  ManagerStatus?: { Addr?: string };
}

/** A node's address: its status address, or its manager address when it reports 0.0.0.0. */
export function nodeAddress(node: SwarmNode): string {
  const status = node.Status?.Addr ?? '';
  return status !== '' && status !== '0.0.0.0' ? status : (node.ManagerStatus?.Addr ?? '').replace(/:\d+$/, '');
}

/**
 * The health check every task runs (Docker HEALTHCHECK, argv only): the app's health-check path
 * answering 2xx/3xx, else the app accepting connections on its port inside the task (no proxy
 * there, so a connection means the app listens).
 */
export function healthcheck(port: number, healthPath: string | null, startupTimeoutMs: number): Record<string, unknown> {
  const test = healthPath === null
    ? ['CMD', PROBE_TARGET, 'nc', '-w', '3', '127.0.0.1', String(port), '-e', PROBE_TARGET, 'true']
    : ['CMD', PROBE_TARGET, 'wget', '-q', '-T', '3', '-O', '/dev/null', `http://127.0.0.1:${port}${healthPath}`];
  return {
    Test: test,
    Interval: 3 * SECOND_NS,
    Timeout: 4 * SECOND_NS,
    Retries: 3,
    // Failures while the app starts do not count; the first success makes the task healthy (and running).
    StartPeriod: Math.max(1, Math.round(startupTimeoutMs / 1000)) * SECOND_NS,
  };
}

export interface SpecInputs {
  readonly target: ReleaseTarget;
  readonly name: string;
  readonly release: string;
  readonly image: string;
  readonly port: number;
  readonly env: Record<string, string>;
  readonly startupTimeoutMs: number;
  readonly probeSource: string;
  /** Engine volumes to mount, and the node they pin the service to (volumes are local to one node). */
  readonly volumes: ReadonlyArray<{ source: string; target: string }>;
  readonly pinnedNode: string | null;
  readonly forceUpdate: number;
  /** The deployment's own overlay network (tenants apart: a task reaches no other deployment's). */
  readonly network: string;
  /** The web service of a compose set: its own ContainerSpec fields, its name on the network, and labels naming it. */
  readonly web?: { readonly container: Record<string, unknown>; readonly alias: string; readonly labels: Record<string, string> } | undefined;
}

/** What every task of an app's services shares: its limits, restarts, placement (pinned to a node, else spread) and log rotation. */
export function appTaskPolicy(target: Pick<ReleaseTarget, 'nanoCpus' | 'memoryBytes' | 'pidsLimit'>, pinnedNode: string | null): Record<string, unknown> {
  return {
    Resources: { Limits: { NanoCPUs: target.nanoCpus, MemoryBytes: target.memoryBytes, Pids: target.pidsLimit } },
    RestartPolicy: { Condition: 'any', Delay: SECOND_NS, MaxAttempts: 0 },
    Placement: {
      Constraints: pinnedNode === null ? [] : [`node.id==${pinnedNode}`],
      Preferences: [{ Spread: { SpreadDescriptor: 'node.id' } }],
    },
    LogDriver: { Name: 'json-file', Options: { 'max-size': '10m', 'max-file': '3' } },
  };
}

/** The service spec of a release: replicas tasks, start-first updates that roll back on failure, dnsrr, the port published in host mode. */
export function serviceSpec(inputs: SpecInputs): ServiceSpec {
  const { target } = inputs;
  const labels = {
    [LABEL_INSTANCE]: target.instanceId,
    [LABEL_DEPLOYMENT]: target.deploymentId,
    [LABEL_BUILD]: target.buildId,
    [LABEL_RELEASE]: inputs.release,
  };
  const replicas = Math.max(1, target.replicas);
  return {
    Name: inputs.name,
    Labels: { [LABEL_MANAGED]: 'true', ...labels, [LABEL_REPLICAS]: String(replicas), ...(inputs.web?.labels ?? {}) },
    TaskTemplate: {
      ContainerSpec: {
        Image: inputs.image,
        ...(inputs.web?.container ?? {}),
        // Not LABEL_MANAGED: a task's container is swarm's to remove, never the start-up sweep's
        // (which removes the installation's managed containers that no record names).
        Labels: labels,
        Env: Object.entries(inputs.env).map(([key, value]) => `${key}=${value}`),
        Init: true,
        CapabilityDrop: ['ALL'],
        CapabilityAdd: [...APP_CAPABILITIES],
        StopGracePeriod: 10 * SECOND_NS,
        Healthcheck: healthcheck(inputs.port, target.healthCheckPath, inputs.startupTimeoutMs),
        Mounts: [
          { Type: 'bind', Source: inputs.probeSource, Target: PROBE_TARGET, ReadOnly: true },
          ...inputs.volumes.map((v) => ({ Type: 'volume', Source: v.source, Target: v.target, ReadOnly: false })),
        ],
      },
      ...appTaskPolicy(target, inputs.pinnedNode),
      // Its own network, and those of the databases linked to it (it reaches each by its name there).
      Networks: [{ Target: inputs.network, ...(inputs.web === undefined ? {} : { Aliases: [inputs.web.alias] }) }, ...(target.networks ?? []).map((n) => ({ Target: n }))],
      ForceUpdate: inputs.forceUpdate,
    },
    Mode: { Replicated: { Replicas: replicas } },
    // One task at a time, each new one healthy before its old one stops; a failure rolls the service back.
    UpdateConfig: { Parallelism: 1, Delay: SECOND_NS, FailureAction: 'rollback', Monitor: 5 * SECOND_NS, MaxFailureRatio: 0, Order: 'start-first' },
    RollbackConfig: { Parallelism: 1, Delay: 0, FailureAction: 'pause', Monitor: 5 * SECOND_NS, MaxFailureRatio: 0, Order: 'start-first' },
    // No routing mesh (it needs IPVS): each task's port is published on its own node, at a port the node picks.
    EndpointSpec: { Mode: 'dnsrr', Ports: [{ Protocol: 'tcp', TargetPort: inputs.port, PublishMode: 'host' }] },
  };
}

/** The release a task was started for. */
export const taskRelease = (task: SwarmTask): string | undefined => task.Spec?.ContainerSpec?.Labels?.[LABEL_RELEASE];

/** The node port of a running task's published port, if any. */
export function taskPort(task: SwarmTask): number | undefined {
  const port = task.Status?.PortStatus?.Ports?.find((p) => (p.PublishedPort ?? 0) > 0)?.PublishedPort;
  return port === undefined ? undefined : port;
}

/** A task the edge may send traffic to, with its slot (the replica number). */
export interface ServingTask {
  readonly task: SwarmTask;
  readonly slot: number;
  readonly upstream: Upstream;
}

/**
 * The tasks that serve a service now, in slot order: running and meant to run, on a ready, active
 * node. A slot whose newer task is still starting (a start-first update) leaves the edge at once:
 * swarm stops its old task as soon as the new one is healthy, and by then no request goes there.
 */
export function servingTasks(tasks: readonly SwarmTask[], nodes: ReadonlyMap<string, SwarmNode>, replicas: number): ServingTask[] {
  const bySlot = new Map<number, SwarmTask[]>();
  for (const task of tasks) {
    if (task.DesiredState !== 'running') continue;
    const slot = task.Slot ?? 0;
    bySlot.set(slot, [...(bySlot.get(slot) ?? []), task]);
  }
  const serving: ServingTask[] = [];
  for (const [slot, slotTasks] of [...bySlot.entries()].sort((a, b) => a[0] - b[0])) {
    const newest = [...slotTasks].sort((a, b) => (a.CreatedAt ?? '').localeCompare(b.CreatedAt ?? '')).at(-1);
    // With one replica the old task keeps serving until it stops: there is no other to take its requests.
    const candidates = replicas > 1 && newest !== undefined ? [newest] : slotTasks;
    for (const task of candidates) {
      const node = nodes.get(task.NodeID ?? '');
      const port = taskPort(task);
      if (task.Status?.State !== 'running' || port === undefined || node === undefined) continue;
      if (node.Status?.State !== 'ready' || (node.Spec?.Availability ?? 'active') !== 'active') continue;
      serving.push({ task, slot, upstream: { host: nodeAddress(node), port } });
    }
  }
  return serving;
}
