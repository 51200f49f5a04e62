// Tunnels on every edge: each instance routes the hosts of tunnels held elsewhere to their holder, learnt from the database (announced by name, resynced).
import type { Coordination } from '../deploy/coordination.js';
import type { TunnelHolder } from '../domain/tunnel-claims.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { Route, StreamTarget } from '../proxy/routing-table.js';

/** Announcement of a tunnel claimed or released: `t:<subdomain>` (the holder is read from the database). */
export const TUNNEL = 't:';
/** Announcement of a deleted API key: `k:<api key id>` (every instance closes the tunnels it opened). */
export const KEY_DELETED = 'k:';
/** Announcement of a disabled user: `u:<user id>` (every instance closes the user's tunnels it holds). */
export const USER_DISABLED = 'u:';

export interface RemoteTunnelSyncDeps {
  readonly coordination: Pick<Coordination, 'announce' | 'onAnnounce'>;
  /** Where live tunnels are held (one subdomain's, when given). */
  readonly holders: (subdomain?: string) => Promise<TunnelHolder[]>;
  /** Every live instance, with its SLIPWAY_INSTANCE_URL (null when it has none). */
  readonly liveInstances: () => Promise<Map<string, string | null>>;
  /** The local data plane (what is written here is not announced again). */
  readonly dataPlane: DataPlane;
  /** The id of the tunnel this instance's own server holds under `subdomain` (connected or in its grace period). */
  readonly localTunnel: (subdomain: string) => string | undefined;
  /** This instance's tunnel of `subdomain` lost its name to a connection on another instance: end it here. */
  readonly dropLocal: (subdomain: string, tunnelId: string) => void;
  /** Closes this instance's tunnels opened with the API key (deleted on another instance). */
  readonly closeForKey: (apiKeyId: string) => void;
  /** Closes this instance's tunnels of the user (disabled on another instance). */
  readonly closeForUser: (userId: string) => void;
  /**
   * Of this instance's tunnels, the API keys deleted and the users disabled since they connected:
   * read at every resync, so an announcement this instance missed (its feed was down) closes them still.
   */
  readonly revoked: () => Promise<{ apiKeyIds: readonly string[]; userIds: readonly string[] }>;
  /** The target forwarding to `holder` at `url`. */
  readonly target: (holder: string, url: string) => StreamTarget;
  readonly self: string;
  readonly resyncMs: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

export interface RemoteTunnelSync {
  /** Tells the other instances this instance claimed or released `subdomain` (call after the database has it). */
  changed(subdomain: string): void;
  /** Tells the other instances an API key was deleted: its tunnels close there too. */
  keyDeleted(apiKeyId: string): void;
  /** Tells the other instances a user was disabled: their tunnels close there too. */
  userDisabled(userId: string): void;
  stop(): void;
}

interface Published {
  readonly route: Route;
  readonly tunnelId: string;
  readonly holder: string;
  readonly url: string | null;
}

/**
 * Keeps a route for every tunnel held by another live instance: `connected` to a forwarding target
 * when the holder has a URL, `disconnected` (the offline tunnel's 503) when it has none or is lost.
 * Changes are announced by name and read back from the database; every `resyncMs`, and after the
 * feed reconnects, every tunnel is read again.
 */
export function syncRemoteTunnels(deps: RemoteTunnelSyncDeps): RemoteTunnelSync {
  const published = new Map<string, Published>();
  /** When this instance last claimed or released each name (a read begun before is stale for it). */
  const changedAt = new Map<string, number>();
  let clock = 0;
  const warnedNoUrl = new Set<string>();

  const withdraw = (subdomain: string): void => {
    const mine = published.get(subdomain);
    if (mine === undefined) return;
    published.delete(subdomain);
    deps.dataPlane.withdraw(subdomain, mine.route);
  };

  const apply = (subdomain: string, holder: TunnelHolder | undefined, instances: Map<string, string | null>, mark: number): void => {
    if ((changedAt.get(subdomain) ?? 0) > mark) return;
    if (holder === undefined || holder.runner === null || holder.runner === deps.self) return withdraw(subdomain);
    // Held elsewhere now: a connection of this name still here (its client moved) ends.
    const local = deps.localTunnel(subdomain);
    if (local !== undefined && local !== holder.tunnelId) {
      deps.log('info', 'a tunnel reconnected to another instance; ending its old connection here', { subdomain, holder: holder.runner });
      deps.dropLocal(subdomain, local);
    }
    const live = instances.has(holder.runner);
    const url = instances.get(holder.runner) ?? null;
    if (live && url === null && !warnedNoUrl.has(holder.runner)) {
      warnedNoUrl.add(holder.runner);
      deps.log('warn', `instance ${holder.runner} holds tunnels but has no SLIPWAY_INSTANCE_URL: their visitors on other instances get the offline tunnel's page`);
    }
    const mine = published.get(subdomain);
    const current = deps.dataPlane.route(subdomain);
    if (mine !== undefined && current === mine.route && mine.tunnelId === holder.tunnelId && mine.holder === holder.runner && mine.url === (live ? url : null)) return;
    // A route this instance's own server published (a tunnel of its own) is left alone.
    if (current !== undefined && current !== mine?.route) {
      if (current.kind !== 'tunnel' || deps.localTunnel(subdomain) !== undefined) return;
    }
    const route: Route =
      live && url !== null
        ? { kind: 'tunnel', tunnelId: holder.tunnelId, state: 'connected', target: deps.target(holder.runner, url) }
        : { kind: 'tunnel', tunnelId: holder.tunnelId, state: 'disconnected' };
    published.set(subdomain, { route, tunnelId: holder.tunnelId, holder: holder.runner, url: live ? url : null });
    deps.dataPlane.publish(subdomain, route);
  };

  const syncOne = async (subdomain: string): Promise<void> => {
    const mark = clock;
    const [rows, instances] = await Promise.all([deps.holders(subdomain), deps.liveInstances()]);
    apply(subdomain, rows[0], instances, mark);
  };
  const syncAll = async (): Promise<void> => {
    const mark = clock;
    const [rows, instances] = await Promise.all([deps.holders(), deps.liveInstances()]);
    const held = new Set<string>();
    for (const row of rows) {
      held.add(row.subdomain);
      apply(row.subdomain, row, instances, mark);
    }
    for (const subdomain of [...published.keys()]) if (!held.has(subdomain) && (changedAt.get(subdomain) ?? 0) <= mark) withdraw(subdomain);
    const revoked = await deps.revoked();
    for (const apiKeyId of revoked.apiKeyIds) deps.closeForKey(apiKeyId);
    for (const userId of revoked.userIds) deps.closeForUser(userId);
  };

  // One sync at a time, in order.
  let chain: Promise<void> = Promise.resolve();
  const run = (what: string, task: () => Promise<void>): void => {
    chain = chain.then(task).catch((err: unknown) => deps.log('warn', `tunnel route sync (${what}) failed; the periodic resync repairs it`, { err }));
  };
  const unsubscribe = deps.coordination.onAnnounce((message) => {
    if (message === null) return run('resync', syncAll);
    const [origin, id] = message.split(' ');
    if (origin === deps.self || id === undefined) return;
    if (id.startsWith(KEY_DELETED)) return deps.closeForKey(id.slice(KEY_DELETED.length));
    if (id.startsWith(USER_DISABLED)) return deps.closeForUser(id.slice(USER_DISABLED.length));
    if (!id.startsWith(TUNNEL)) return;
    const subdomain = id.slice(TUNNEL.length);
    run(id, () => syncOne(subdomain));
  });
  const timer = setInterval(() => run('resync', syncAll), deps.resyncMs);
  timer.unref();
  run('start', syncAll);
  return {
    changed(subdomain) {
      changedAt.set(subdomain, ++clock);
      // This instance's own tunnel replaces whatever pointed elsewhere (its server publishes the route).
      const mine = published.get(subdomain);
      if (mine !== undefined && deps.dataPlane.route(subdomain) !== mine.route) published.delete(subdomain);
      deps.coordination.announce(`${deps.self} ${TUNNEL}${subdomain}`);
    },
    keyDeleted(apiKeyId) {
      deps.coordination.announce(`${deps.self} ${KEY_DELETED}${apiKeyId}`);
    },
    userDisabled(userId) {
      deps.coordination.announce(`${deps.self} ${USER_DISABLED}${userId}`);
    },
    stop() {
      clearInterval(timer);
      unsubscribe();
    },
  };
}
