// The docker runtime's one node: the engine Slipway runs beside, which can be neither drained nor activated.
import os from 'node:os';
import { DomainError } from '../../core/errors.js';
import type { NodeDirectory, NodeView } from '../../domain/nodes.js';
import type { ContainerEngine } from '../engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../engine.js';

/** The id of the docker runtime's only node. */
export const LOCAL_NODE_ID = 'local';

/** Nodes under `SLIPWAY_RUNTIME=docker`: one, this host's engine, reached on loopback. */
export function dockerNodes(engine: ContainerEngine, instanceId: string): NodeDirectory {
  const node = async (signal?: AbortSignal): Promise<NodeView> => {
    const up = await engine.ping(signal ?? AbortSignal.timeout(5000)).then(() => true, () => false);
    const running = up ? (await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId })).filter((c) => c.running && c.upstream !== null) : [];
    return {
      id: LOCAL_NODE_ID,
      hostname: os.hostname(),
      address: '127.0.0.1',
      role: 'manager',
      availability: 'active',
      state: up ? 'ready' : 'down',
      replicas: running.length,
    };
  };
  return {
    list: async (signal) => [await node(signal)],
    setAvailability: async (id) => {
      if (id !== LOCAL_NODE_ID) return undefined;
      throw new DomainError('invalid_state', 'the docker runtime runs every app on this one engine: there is no other node to move its replicas to (SLIPWAY_RUNTIME=swarm runs apps over several nodes)');
    },
  };
}
