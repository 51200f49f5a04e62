// A swarm's nodes through its manager's Engine API (1.41): listed with this installation's running replicas, drained and activated.
import type Dockerode from 'dockerode';
import type { NodeDirectory, NodeView } from '../../domain/nodes.js';
import { LABEL_INSTANCE } from '../engine.js';
import { statusCode } from '../docker/engine-calls.js';
import { nodeAddress, updateAtVersion, type SwarmNode } from './swarm-service.js';

/** A node as the API shows it, with this installation's running replicas on it. */
function view(node: SwarmNode, replicas: number): NodeView {
  const availability = node.Spec?.Availability === 'drain' || node.Spec?.Availability === 'pause' ? node.Spec.Availability : 'active';
  return {
    id: node.ID,
    hostname: node.Description?.Hostname ?? '',
    address: nodeAddress(node),
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
      let node: SwarmNode | undefined;
      try {
        // An update sends the whole spec with the version it was read at (Engine API 1.41, NodeUpdate).
        node = await updateAtVersion(
          () => inspect(id),
          (n) => docker.getNode(n.ID).update({ version: n.Version?.Index ?? 0, ...n.Spec, Availability: availability }),
        );
      } catch (err) {
        if (statusCode(err) === 404) return undefined;
        throw err;
      }
      if (node === undefined) return undefined;
      const updated = await inspect(node.ID);
      return updated === undefined ? undefined : view(updated, (await replicasByNode()).get(node.ID) ?? 0);
    },
  };
}
