// The nodes apps run on, as administrators see and steer them (decisions §16).
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { authorizeAdmin } from './policy.js';

/** One node as `GET /api/v1/nodes` shows it. */
export interface NodeView {
  readonly id: string;
  readonly hostname: string;
  /** Where the edge reaches the node's replicas. */
  readonly address: string;
  readonly role: 'manager' | 'worker';
  readonly availability: 'active' | 'pause' | 'drain';
  /** `ready`, `down`, `unknown` or `disconnected` (the runtime's word). */
  readonly state: string;
  /** This installation's app replicas running on the node now. */
  readonly replicas: number;
}

/** The nodes port: the runtime's view of its nodes (one under `docker`, a swarm's under `swarm`). */
export interface NodeDirectory {
  list(signal?: AbortSignal): Promise<NodeView[]>;
  /**
   * Drains a node (its replicas move elsewhere and it takes no new ones) or makes it active again.
   * Resolves with the node afterwards; undefined when no node has that id.
   */
  setAvailability(id: string, availability: 'active' | 'drain', signal?: AbortSignal): Promise<NodeView | undefined>;
}

/** `GET /api/v1/nodes`: administrators only. */
export async function listNodes(nodes: NodeDirectory, principal: Principal, signal?: AbortSignal): Promise<NodeView[]> {
  authorizeAdmin(principal);
  return nodes.list(signal);
}

/** `POST /api/v1/nodes/{id}/drain` and `/activate`: administrators only; an unknown node is 404. */
export async function setNodeAvailability(
  nodes: NodeDirectory,
  principal: Principal,
  id: string,
  availability: 'active' | 'drain',
  signal?: AbortSignal,
): Promise<NodeView> {
  authorizeAdmin(principal);
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(id)) throw new DomainError('not_found', 'node not found');
  const node = await nodes.setAvailability(id, availability, signal);
  if (node === undefined) throw new DomainError('not_found', 'node not found');
  return node;
}
