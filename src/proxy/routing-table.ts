// The routing table: which `<subdomain>.<domain>` host goes where. Every data plane reads this.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

import type { Upstream } from '../core/upstream.js';

export type { Upstream };

/** What the server learns of each request served over a whole connection (for its metrics). */
export interface ConnectionHooks {
  /** A request ended with `status` (0: no answer) after `seconds`. */
  onRequestEnd?(status: number, seconds: number): void;
  /**
   * Takes back a connection between requests (the tunnel went away): the HTTP server serves its
   * next requests (a 503 page). Without it such a connection is closed.
   */
  release?(socket: Socket): void;
}

/** An in-process target (a tunnel) that serves requests itself instead of a TCP upstream. */
export interface StreamTarget {
  handleRequest(req: IncomingMessage, res: ServerResponse): void;
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /**
   * Serves a whole visitor connection whose first request named `host` (see front-door.ts): `head`
   * holds the bytes read so far; the socket is paused and resumed by the caller. A target without
   * it (a tunnel held by another instance) is served request by request through the HTTP server.
   */
  handleConnection?(socket: Socket, head: Buffer, host: string, hooks: ConnectionHooks): void;
}

/**
 * What a host resolves to. `live` apps have their upstreams (one per replica, at least one); an app
 * in any other state answers 503.
 * A tunnel is `connected` (with a target) or `disconnected` (held for a reconnecting client: 503).
 */
export type Route =
  | { readonly kind: 'app'; readonly deploymentId: string; readonly state: 'live'; readonly upstreams: readonly Upstream[] }
  | { readonly kind: 'app'; readonly deploymentId: string; readonly state: 'stopped' | 'failed' | 'starting'; readonly failure?: DeployFailure }
  | { readonly kind: 'tunnel'; readonly tunnelId: string; readonly state: 'connected'; readonly target: StreamTarget }
  | { readonly kind: 'tunnel'; readonly tunnelId: string; readonly state: 'disconnected' };

/** Which step of a failed app's last deploy failed, when the instance that ran it knows (the 503 page says it). */
export type DeployFailure = 'source' | 'build' | 'start';

/** Result of looking a Host header up: not an app host at all, or a subdomain with its route (if any). */
export type Resolution = { readonly subdomain: string; readonly route: Route | undefined } | null;

/** A custom domain: another hostname for one deployment's subdomain (decisions §8). */
export interface HostAlias {
  readonly subdomain: string;
  readonly deploymentId: string;
}

/**
 * Host → route map for `<subdomain>.<domain>`, plus custom hostnames that stand for a deployment's
 * subdomain (they follow its route: live, 503 when stopped, …); plain data so any data plane can serve it.
 */
export class RoutingTable {
  readonly #suffix: string;
  readonly #routes = new Map<string, Route>();
  readonly #listeners = new Set<(subdomain: string, route: Route | undefined) => void>();
  readonly #aliases = new Map<string, HostAlias>();
  readonly #aliasListeners = new Set<(hostname: string, alias: HostAlias | undefined) => void>();

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
    const removed = this.#routes.get(key);
    if (!this.#routes.delete(key)) return;
    for (const listener of this.#listeners) listener(key, undefined);
    // A deployment's route goes only when the deployment does: its custom hostnames go with it.
    if (removed?.kind === 'app') {
      for (const [hostname, alias] of this.#aliases) if (alias.deploymentId === removed.deploymentId) this.deleteHost(hostname);
    }
  }

  /** Makes `hostname` (a custom domain, lower case) reach the deployment served at `alias.subdomain`. */
  setHost(hostname: string, alias: HostAlias): void {
    const key = hostname.toLowerCase();
    this.#aliases.set(key, alias);
    for (const listener of this.#aliasListeners) listener(key, alias);
  }

  /** Removes a custom hostname. */
  deleteHost(hostname: string): void {
    const key = hostname.toLowerCase();
    if (!this.#aliases.delete(key)) return;
    for (const listener of this.#aliasListeners) listener(key, undefined);
  }

  /** The custom hostname's alias, if any. */
  getHost(hostname: string): HostAlias | undefined {
    return this.#aliases.get(hostname.toLowerCase());
  }

  /** All custom hostnames, for a data plane that syncs the whole table. */
  hosts(): IterableIterator<[string, HostAlias]> {
    return this.#aliases.entries();
  }

  /** Calls `listener` on every change of a custom hostname; returns a function that unsubscribes. */
  subscribeHosts(listener: (hostname: string, alias: HostAlias | undefined) => void): () => void {
    this.#aliasListeners.add(listener);
    return () => this.#aliasListeners.delete(listener);
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
   * host is neither `<label>.<domain>` nor a custom hostname (then it is the API and dashboard).
   * A custom hostname resolves to its deployment's subdomain and route; it never reaches whatever
   * else holds that subdomain later (the route must still be its deployment's).
   */
  resolveHost(hostHeader: string | undefined): Resolution {
    if (hostHeader === undefined) return null;
    let host = hostHeader.trim().toLowerCase();
    // Strip the port; IPv6 literals ("[::1]:8080") are never app hosts.
    if (host.startsWith('[')) return null;
    const colon = host.lastIndexOf(':');
    if (colon !== -1) host = host.slice(0, colon);
    if (host.endsWith('.')) host = host.slice(0, -1);
    if (this.#aliases.size > 0) {
      const alias = this.#aliases.get(host);
      if (alias !== undefined) {
        const route = this.#routes.get(alias.subdomain);
        return { subdomain: alias.subdomain, route: route?.kind === 'app' && route.deploymentId === alias.deploymentId ? route : undefined };
      }
    }
    if (!host.endsWith(this.#suffix)) return null;
    const label = host.slice(0, -this.#suffix.length);
    if (label.length === 0 || label.includes('.')) return null;
    return { subdomain: label, route: this.#routes.get(label) };
  }
}
