// The figures of a service's running tasks, each read from the engine of the node it runs on (the manager's own, or a configured node engine).
import type { ReplicaStats } from '../app-runtime.js';
import type { ContainerStats } from '../engine.js';
import { withTimeout } from '../docker/engine-calls.js';
import { nodeAddress, type SwarmNode, type SwarmTask } from './swarm-service.js';

/** What reads a container's figures on one node's engine (a ContainerEngine does). */
export interface StatsReader {
  /** Resource use of a running container; null when it does not exist or is not running. */
  containerStats(id: string, signal?: AbortSignal): Promise<ContainerStats | null>;
}

/** The engines of the swarm's other nodes (SLIPWAY_SWARM_NODE_ENGINES): a node's, or undefined when none is configured. */
export interface NodeEngines {
  engineOf(node: SwarmNode): StatsReader | undefined;
}

/** Time limit of reading one task's figures on a node's engine (an engine's usual call time limit). */
export const NODE_STATS_TIMEOUT_MS = 30_000;

/** A node engine as configured: `node` is its address as swarm reports it, its hostname or its id. */
export interface NodeEngineEntry {
  readonly node: string;
  readonly url: string;
}

/** NodeEngines over configured entries; `open` makes each entry's reader once, when first asked. */
export function configuredNodeEngines(entries: readonly NodeEngineEntry[], open: (url: string) => StatsReader): NodeEngines {
  const byKey = new Map(entries.map((e) => [e.node, e.url]));
  const opened = new Map<string, StatsReader>();
  return {
    engineOf(node: SwarmNode): StatsReader | undefined {
      const keys = [nodeAddress(node), node.Description?.Hostname ?? '', node.ID].filter((k) => k !== '');
      const url = keys.map((k) => byKey.get(k)).find((u) => u !== undefined);
      if (url === undefined) return undefined;
      let reader = opened.get(url);
      if (reader === undefined) {
        reader = open(url);
        opened.set(url, reader);
      }
      return reader;
    },
  };
}

export interface ReplicaStatsOptions {
  /** The id of the node whose engine `local` is (the manager Slipway talks to). */
  readonly localNodeId: string;
  readonly local: StatsReader;
  /** Undefined: only the local node's tasks are read (SLIPWAY_SWARM_NODE_ENGINES unset). */
  readonly nodeEngines: NodeEngines | undefined;
  /** Told once per node while its figures cannot be read (no engine configured, no answer). */
  readonly warnings: NodeWarnings;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal | undefined;
}

/** Warns once per node and problem, until that node's figures are read again. */
export class NodeWarnings {
  readonly #warn: (message: string) => void;
  readonly #told = new Map<string, string>();

  constructor(warn: (message: string) => void) {
    this.#warn = warn;
  }

  problem(nodeId: string, kind: string, message: string): void {
    if (this.#told.get(nodeId) === kind) return;
    this.#told.set(nodeId, kind);
    this.#warn(message);
  }

  answered(nodeId: string): void {
    this.#told.delete(nodeId);
  }
}

/**
 * Each running task's figures with its replica number (the task's slot), sorted by it. A task on a
 * node whose engine is not configured, or does not answer in time, has no entry: the others are
 * still read, and the call never fails for it.
 */
export async function readReplicaStats(tasks: readonly SwarmTask[], nodes: ReadonlyMap<string, SwarmNode>, options: ReplicaStatsOptions): Promise<ReplicaStats[]> {
  const timeoutMs = options.timeoutMs ?? NODE_STATS_TIMEOUT_MS;
  const running = tasks.filter((t) => t.Status?.State === 'running' && (t.Status.ContainerStatus?.ContainerID ?? '') !== '');
  const read = async (task: SwarmTask): Promise<ReplicaStats[]> => {
    const nodeId = task.NodeID ?? '';
    const containerId = task.Status?.ContainerStatus?.ContainerID ?? '';
    const replica = task.Slot ?? 0;
    if (nodeId === options.localNodeId) {
      const s = await options.local.containerStats(containerId, options.signal).catch(() => null);
      return s === null ? [] : [{ ...s, replica }];
    }
    if (options.nodeEngines === undefined) return [];
    const node = nodes.get(nodeId) ?? { ID: nodeId };
    const name = nodeName(node);
    const engine = options.nodeEngines.engineOf(node);
    if (engine === undefined) {
      options.warnings.problem(nodeId, 'unconfigured', `metrics: node ${name} has no engine in SLIPWAY_SWARM_NODE_ENGINES; its replicas are left out of the figures`);
      return [];
    }
    try {
      const s = await withTimeout(`stats of replica ${replica} on node ${name}`, timeoutMs, (signal) => engine.containerStats(containerId, signal), options.signal);
      options.warnings.answered(nodeId);
      return s === null ? [] : [{ ...s, replica }];
    } catch (err) {
      if (options.signal?.aborted === true) throw err;
      options.warnings.problem(nodeId, 'unanswered', `metrics: the engine of node ${name} did not answer (${err instanceof Error ? err.message : String(err)}); its replicas are left out of the figures`);
      return [];
    }
  };
  const stats = await Promise.all(running.map(read));
  return stats.flat().sort((a, b) => a.replica - b.replica);
}

/** How a node is named in a warning: hostname and address (never its engine's URL). */
function nodeName(node: SwarmNode): string {
  const hostname = node.Description?.Hostname ?? '';
  const address = nodeAddress(node);
  if (hostname !== '' && address !== '') return `${hostname} (${address})`;
  return hostname !== '' ? hostname : address !== '' ? address : node.ID;
}
