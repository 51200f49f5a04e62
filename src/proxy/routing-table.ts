// The routing table: which `<subdomain>.<domain>` host goes where. Every data plane reads this.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

import type { Upstream } from '../core/upstream.js';

export type { Upstream };

/** An in-process target (a tunnel) that serves requests itself instead of a TCP upstream. */
export interface StreamTarget {
  handleRequest(req: IncomingMessage, res: ServerResponse): void;
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/**
 * What a host resolves to. `live` apps have an upstream; an app in any other state answers 503.
 * A tunnel is `connected` (with a target) or `disconnected` (held for a reconnecting client: 503).
 */
export type Route =
  | { readonly kind: 'app'; readonly deploymentId: string; readonly state: 'live'; readonly upstream: Upstream }
  | { readonly kind: 'app'; readonly deploymentId: string; readonly state: 'stopped' | 'failed' | 'starting' }
  | { readonly kind: 'tunnel'; readonly tunnelId: string; readonly state: 'connected'; readonly target: StreamTarget }
  | { readonly kind: 'tunnel'; readonly tunnelId: string; readonly state: 'disconnected' };

/** Result of looking a Host header up: not an app host at all, or a subdomain with its route (if any). */
export type Resolution = { readonly subdomain: string; readonly route: Route | undefined } | null;

/** Host → route map for `<subdomain>.<domain>`; plain data so any data plane can serve it. */
export class RoutingTable {
  readonly #suffix: string;
  readonly #routes = new Map<string, Route>();
  readonly #listeners = new Set<(subdomain: string, route: Route | undefined) => void>();

  constructor(domain: string) {
    this.#suffix = `.${domain.toLowerCase()}`;
  }

  /** Sets (or replaces) the route of one subdomain. */
  set(subdomain: string, route: Route): void {
    const key = subdomain.toLowerCase();
    this.#routes.set(key, route);
    for (const listener of this.#listeners) listener(key, route);
  }

  /** Removes a subdomain's route, but only if it is still `expected` when given (avoids racing a newer owner). */
  delete(subdomain: string, expected?: Route): void {
    const key = subdomain.toLowerCase();
    if (expected !== undefined && this.#routes.get(key) !== expected) return;
    if (!this.#routes.delete(key)) return;
    for (const listener of this.#listeners) listener(key, undefined);
  }

  get(subdomain: string): Route | undefined {
    return this.#routes.get(subdomain.toLowerCase());
  }

  /** All routes, for a data plane that syncs the whole table. */
  entries(): IterableIterator<[string, Route]> {
    return this.#routes.entries();
  }

  /** Calls `listener` on every change; returns a function that unsubscribes. */
  subscribe(listener: (subdomain: string, route: Route | undefined) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Resolves a Host header (any port) to a subdomain of the configured domain, or null when the
   * host is not `<label>.<domain>` (then it is the API and dashboard).
   */
  resolveHost(hostHeader: string | undefined): Resolution {
    if (hostHeader === undefined) return null;
    let host = hostHeader.trim().toLowerCase();
    // Strip the port; IPv6 literals ("[::1]:8080") are never app hosts.
    if (host.startsWith('[')) return null;
    const colon = host.lastIndexOf(':');
    if (colon !== -1) host = host.slice(0, colon);
    if (host.endsWith('.')) host = host.slice(0, -1);
    if (!host.endsWith(this.#suffix)) return null;
    const label = host.slice(0, -this.#suffix.length);
    if (label.length === 0 || label.includes('.')) return null;
    return { subdomain: label, route: this.#routes.get(label) };
  }
}
