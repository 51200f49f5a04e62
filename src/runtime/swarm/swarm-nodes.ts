// A swarm's nodes through its manager's Engine API (1.41): listed with this installation's running replicas, drained and activated.
import type Dockerode from 'dockerode';
import type { NodeDirectory, NodeView } from '../../domain/nodes.js';
import { LABEL_INSTANCE } from '../engine.js';
import { statusCode } from '../docker/engine-calls.js';

/** What the Engine API answers for a node (the fields read here). */
interface SwarmNode {
  ID: string;
  Version?: { Index?: number };
  Spec?: { Role?: string; Availability?: string; Labels?: Record<string, string>; Name?: string };
  Description?: { Hostname?: string };
  Status?: { State?: string; Addr?: string };
  ManagerStatus?: { Addr?: string };
}

/** Attempts of a node update that meets "update out of sequence" (another update came first). */
const UPDATE_ATTEMPTS = 5;

function view(node: SwarmNode, replicas: number): NodeView {
  // A manager may report 0.0.0.0 as its status address; its manager address names the host then.
  const status = node.Status?.Addr ?? '';
  const address = status !== '' && status !== '0.0.0.0' ? status : (node.ManagerStatus?.Addr ?? '').replace(/:\d+$/, '');
  const availability = node.Spec?.Availability === 'drain' || node.Spec?.Availability === 'pause' ? node.Spec.Availability : 'active';
  return {
    id: node.ID,
    hostname: node.Description?.Hostname ?? '',
    address,
    role: node.Spec?.Role === 'manager' ? 'manager' : 'worker',
    availability,
    state: node.Status?.State ?? 'unknown',
    replicas,
  };
}

/** The nodes of the swarm `docker` (a manager) manages; replicas count this installation's running tasks. */
export function swarmNodes(docker: Dockerode, instanceId: string): NodeDirectory {
  const replicasByNode = async (): Promise<Map<string, number>> => {
    const services = (await docker.listServices({ filters: { label: [`${LABEL_INSTANCE}=${instanceId}`] } })) as Array<{ ID: string }>;
    const ours = new Set(services.map((s) => s.ID));
    const tasks = (await docker.listTasks({ filters: { 'desired-state': ['running'] } })) as Array<{ ServiceID?: string; NodeID?: string; Status?: { State?: string } }>;
    const counts = new Map<string, number>();
    for (const task of tasks) {
      if (task.Status?.State !== 'running' || task.NodeID === undefined || !ours.has(task.ServiceID ?? '')) continue;
      counts.set(task.NodeID, (counts.get(task.NodeID) ?? 0) + 1);
    }
    return counts;
  };
  const inspect = async (id: string): Promise<SwarmNode | undefined> => {
    try {
      return (await docker.getNode(id).inspect()) as SwarmNode;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  };
  return {
    async list() {
      const [nodes, counts] = await Promise.all([docker.listNodes() as Promise<SwarmNode[]>, replicasByNode()]);
      return nodes.map((node) => view(node, counts.get(node.ID) ?? 0)).sort((a, b) => a.hostname.localeCompare(b.hostname) || a.id.localeCompare(b.id));
    },
    async setAvailability(id, availability) {
      for (let attempt = 1; ; attempt++) {
        const node = await inspect(id);
        if (node === undefined) return undefined;
        try {
          // An update sends the whole spec with the version it was read at (Engine API 1.41, NodeUpdate).
          await docker.getNode(node.ID).update({ version: node.Version?.Index ?? 0, ...node.Spec, Availability: availability });
        } catch (err) {
          const outOfSequence = err instanceof Error && err.message.includes('update out of sequence');
          if (outOfSequence && attempt < UPDATE_ATTEMPTS) continue;
          if (statusCode(err) === 404) return undefined;
          throw err;
        }
        const updated = await inspect(node.ID);
        return updated === undefined ? undefined : view(updated, (await replicasByNode()).get(node.ID) ?? 0);
      }
    },
  };
}
