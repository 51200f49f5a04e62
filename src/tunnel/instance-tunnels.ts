// Tunnels across control-plane instances (decisions §15), wired in one place: routes to tunnels held elsewhere, forwarded calls, lost holders' names.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { BackgroundTask } from '../core/background.js';
import type { Coordination } from '../deploy/coordination.js';
import type { InstanceRegistry } from '../domain/instances.js';
import type { TunnelClaimStore } from '../domain/tunnel-claims.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { RoutingTable } from '../proxy/routing-table.js';
import { serveForwardedRequest, serveForwardedUpgrade, type ForwardedCallDeps } from './forwarded-calls.js';
import { InstanceCalls, isInstanceCall } from './instance-calls.js';
import { RemoteTunnel } from './remote-tunnel.js';
import { syncRemoteTunnels, type RemoteTunnelSync } from './remote-tunnel-sync.js';
import type { TunnelServer } from './tunnel-server.js';

/** How long a dropped tunnel's name is held for its owner (the tunnel server's default grace). */
const TUNNEL_GRACE_MS = 60_000;

export interface InstanceTunnelsDeps {
  /** The key inter-instance calls are signed with (derived from the installation key). */
  readonly callKey: Buffer;
  readonly self: string;
  /** True when several instances may share the database (PostgreSQL). */
  readonly shared: boolean;
  readonly instanceUrl: string | undefined;
  readonly coordination: Coordination;
  readonly claims: TunnelClaimStore;
  readonly registry: Pick<InstanceRegistry, 'liveIds' | 'liveUrls'>;
  readonly table: RoutingTable;
  /** The local data plane (routes written here are not announced). */
  readonly dataPlane: DataPlane;
  /** The public scheme, for X-Forwarded-Proto. */
  readonly protocol: string;
  readonly resyncMs: number;
  /** How often the leader looks for lost instances' tunnels. */
  readonly checkMs: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/** A tunnel held by another instance, as `GET /api/v1/tunnels` lists it. */
export interface TunnelElsewhere {
  readonly id: string;
  readonly subdomain: string;
  readonly userId: string;
  readonly apiKeyId: string;
  readonly connectedAt: string;
  readonly state: 'connected' | 'disconnected';
}

/**
 * The parts of this instance that let a tunnel's visitors land on any instance: created before the
 * tunnel server (whose claims it announces), started once the server exists.
 */
export class InstanceTunnels {
  readonly #deps: InstanceTunnelsDeps;
  readonly #calls: InstanceCalls;
  readonly #agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  readonly #forwarded: ForwardedCallDeps;
  #sync: RemoteTunnelSync | undefined;

  constructor(deps: InstanceTunnelsDeps) {
    this.#deps = deps;
    this.#calls = new InstanceCalls(deps.callKey, deps.self);
    this.#forwarded = { calls: this.#calls, table: deps.table, log: deps.log };
  }

  /** Starts following where tunnels are held (on a shared database only); returns the stop. */
  start(tunnels: TunnelServer): () => void {
    const deps = this.#deps;
    if (!deps.shared) return () => undefined;
    if (deps.instanceUrl === undefined) {
      deps.log('warn', 'SLIPWAY_INSTANCE_URL is not set: visitors of the tunnels held here cannot be forwarded from other instances (they get the offline tunnel page there)');
    }
    const context = { calls: this.#calls, protocol: deps.protocol, agents: this.#agents, log: deps.log };
    const sync = syncRemoteTunnels({
      coordination: deps.coordination,
      holders: (subdomain) => deps.claims.holders(subdomain),
      liveInstances: async () => {
        const now = new Date();
        const [ids, urls] = await Promise.all([deps.registry.liveIds(now), deps.registry.liveUrls(now)]);
        return new Map(ids.map((id) => [id, urls.get(id) ?? null]));
      },
      dataPlane: deps.dataPlane,
      localTunnel: (subdomain) => tunnels.holding(subdomain),
      dropLocal: (subdomain, tunnelId) => tunnels.relinquish(subdomain, tunnelId),
      closeForKey: (apiKeyId) => tunnels.closeForKey(apiKeyId),
      closeForUser: (userId) => tunnels.closeForUser(userId),
      revoked: () => deps.claims.revokedOwners(deps.self),
      target: (holder, url) => new RemoteTunnel(holder, url, context),
      self: deps.self,
      resyncMs: deps.resyncMs,
      log: deps.log,
    });
    this.#sync = sync;
    return () => {
      if (this.#sync !== sync) return;
      this.#sync = undefined;
      sync.stop();
    };
  }

  /**
   * The leader's round that frees the names of tunnels whose instance is lost, once a dropped
   * tunnel's grace has passed too (lost after 30 s, then 60 s): until then visitors get the offline
   * page and clients take them back. Undefined on a database of one instance.
   */
  lostTunnelsTask(): BackgroundTask | undefined {
    const deps = this.#deps;
    if (!deps.shared) return undefined;
    return {
      name: 'releasing the tunnels of a lost instance',
      scope: 'leaderOnly',
      everyMs: deps.checkMs,
      run: async () => {
        const live = await deps.registry.liveIds(new Date(Date.now() - TUNNEL_GRACE_MS));
        for (const subdomain of await deps.claims.releaseHeldOutside([...live, deps.self])) this.changed(subdomain);
      },
    };
  }

  /** This instance claimed or released `subdomain` (the database has it): the others read it back. */
  changed(subdomain: string): void {
    this.#sync?.changed(subdomain.toLowerCase());
  }

  /** An API key was deleted here: the other instances close its tunnels too. */
  keyDeleted(apiKeyId: string): void {
    this.#sync?.keyDeleted(apiKeyId);
  }

  /** A user was disabled here: the other instances close their tunnels too. */
  userDisabled(userId: string): void {
    this.#sync?.userDisabled(userId);
  }

  /** Tunnels held by the other instances (the user's, or everyone's), leaving out ids already shown. */
  async elsewhere(userId: string | undefined, shown: ReadonlySet<string>): Promise<TunnelElsewhere[]> {
    if (this.#sync === undefined) return [];
    const [held, live] = await Promise.all([this.#deps.claims.holders(), this.#deps.registry.liveIds(new Date())]);
    return held.flatMap((h) =>
      h.runner === null || h.runner === this.#deps.self || shown.has(h.tunnelId) || (userId !== undefined && h.userId !== userId)
        ? []
        : [{ id: h.tunnelId, subdomain: h.subdomain, userId: h.userId, apiKeyId: h.apiKeyId, connectedAt: h.connectedAt, state: live.includes(h.runner) ? 'connected' : 'disconnected' } as const],
    );
  }

  /**
   * Serves a request if it is another instance's call (for a tunnel host: an app's visitor who sends
   * such headers is the app's, and they are dropped): verified, or 401. False when it is not one.
   */
  handleRequest(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.#isCall(req)) return false;
    serveForwardedRequest(req, res, this.#forwarded);
    return true;
  }

  /** Same for an upgrade. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (!this.#isCall(req)) return false;
    serveForwardedUpgrade(req, socket, head, this.#forwarded);
    return true;
  }

  close(): void {
    this.#sync?.stop();
    this.#agents.http.destroy();
    this.#agents.https.destroy();
  }

  #isCall(req: IncomingMessage): boolean {
    return isInstanceCall(req.headers) && this.#deps.table.resolveHost(req.headers.host)?.route?.kind !== 'app';
  }
}
