// The tunnels part: the tunnel server, and tunnels across instances (visitors on any instance reach the one holding the tunnel).
import type { TunnelDirectory } from '../api/api-deps.js';
import { appUrl, type Config } from '../config.js';
import { watcherTask, type Background } from '../core/background.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import type { Coordination } from '../deploy/coordination.js';
import { authenticateBearer } from '../domain/accounts.js';
import type { AccountStore } from '../domain/account-store.js';
import type { InstanceRegistry } from '../domain/instances.js';
import type { KeyUsage } from '../domain/key-usage.js';
import { authenticateTunnelKey, claimTunnelSubdomain, releaseTunnelsOf, releaseTunnelSubdomain, type TunnelClaimStore } from '../domain/tunnel-claims.js';
import type { DataPlane } from '../proxy/data-plane.js';
import type { RoutingTable } from '../proxy/routing-table.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { INSTANCE_CALL_KEY_INFO } from './instance-calls.js';
import { InstanceTunnels } from './instance-tunnels.js';
import { TunnelServer } from './tunnel-server.js';

/** How often the tunnels held elsewhere are read again, and how often the leader looks for lost instances' tunnels. */
const RESYNC_MS = 10_000;
const LOST_CHECK_MS = 5_000;

export interface TunnelsPartDeps {
  readonly config: Config;
  readonly log: Log;
  readonly self: string;
  readonly cipher: ValueCipher;
  readonly coordination: Coordination;
  readonly claims: TunnelClaimStore;
  readonly registry: InstanceRegistry;
  readonly accounts: AccountStore;
  readonly keyUsage: KeyUsage;
  readonly table: RoutingTable;
  /** The local plane (what the sync across instances writes is not announced). */
  readonly localPlane: DataPlane;
  /** The announcing plane (a tunnel's route is announced to the other instances). */
  readonly dataPlane: DataPlane;
  /** Where the sync across instances and the leader's release of lost instances' tunnels are registered. */
  readonly background: Pick<Background, 'add'>;
}

export interface TunnelsOffers {
  readonly tunnels: TunnelServer;
  readonly acrossInstances: InstanceTunnels;
  /** What the API lists and closes: this instance's tunnels and the other instances'. */
  readonly directory: TunnelDirectory;
}

/** No tunnel survives a restart (clients reconnect): this instance's claims are released first. */
export async function tunnelsPart(deps: TunnelsPartDeps): Promise<Part<TunnelsOffers>> {
  const { config, log, self, claims } = deps;
  await releaseTunnelsOf(claims, self);
  const urlFor = (subdomain: string): string => appUrl(config, subdomain);
  // Tunnels across instances (decisions §15): visitors on any instance reach the one holding the tunnel (signed calls).
  const acrossInstances = new InstanceTunnels({
    callKey: deps.cipher.deriveKey(INSTANCE_CALL_KEY_INFO),
    self,
    shared: config.databaseUrl !== undefined,
    instanceUrl: config.instanceUrl,
    coordination: deps.coordination,
    claims,
    registry: deps.registry,
    table: deps.table,
    dataPlane: deps.localPlane,
    protocol: config.publicUrl.protocol.replace(':', ''),
    resyncMs: RESYNC_MS,
    checkMs: LOST_CHECK_MS,
    log,
  });
  const tunnels = new TunnelServer({
    dataPlane: deps.dataPlane,
    authority: {
      authenticateKey: (key) => authenticateTunnelKey((bearer) => authenticateBearer(deps.accounts, deps.keyUsage, bearer), key),
      claimSubdomain: async (subdomain, owner, tunnelId) => {
        const result = await claimTunnelSubdomain(claims, self, subdomain, owner, tunnelId);
        if (result === 'ok') acrossInstances.changed(subdomain);
        return result;
      },
      releaseSubdomain: async (subdomain, tunnelId) => {
        await releaseTunnelSubdomain(claims, subdomain, tunnelId);
        acrossInstances.changed(subdomain);
      },
    },
    publicUrlFor: urlFor,
    limits: { tunnelsPerKey: config.tunnelsPerKey, streamsPerTunnel: config.streamsPerTunnel },
    idleTimeoutMs: config.edge.keepAliveTimeoutMs,
    log,
  });
  deps.background.add(watcherTask('following tunnels across instances', 'everyInstance', () => acrossInstances.start(tunnels)));
  const lostTunnels = acrossInstances.lostTunnelsTask();
  if (lostTunnels !== undefined) deps.background.add(lostTunnels);
  return {
    offers: { tunnels, acrossInstances, directory: tunnelDirectory(tunnels, acrossInstances, urlFor) },
    stop: async () => {
      await tunnels.close();
      acrossInstances.close();
    },
  };
}

/** The API's view: tunnels held here (with their streams), then those held by other instances (streams counted there). */
function tunnelDirectory(tunnels: TunnelServer, acrossInstances: InstanceTunnels, urlFor: (subdomain: string) => string): TunnelDirectory {
  return {
    list: async (userId) => {
      const here = tunnels.list(userId).map((t) => ({
        id: t.id,
        subdomain: t.subdomain,
        url: t.url,
        api_key_id: t.apiKeyId,
        connected_at: t.connectedAt,
        state: t.state,
        streams: t.streams,
        ...(userId === undefined ? { user_id: t.userId } : {}),
      }));
      const elsewhere = (await acrossInstances.elsewhere(userId, new Set(here.map((t) => t.id)))).map((t) => ({
        id: t.id,
        subdomain: t.subdomain,
        url: urlFor(t.subdomain),
        api_key_id: t.apiKeyId,
        connected_at: t.connectedAt,
        state: t.state,
        streams: 0,
        ...(userId === undefined ? { user_id: t.userId } : {}),
      }));
      return [...here, ...elsewhere];
    },
    closeForKey: (apiKeyId) => {
      tunnels.closeForKey(apiKeyId);
      acrossInstances.keyDeleted(apiKeyId);
    },
    closeForUser: (userId) => {
      tunnels.closeForUser(userId);
      acrossInstances.userDisabled(userId);
    },
  };
}
