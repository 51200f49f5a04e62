// HTTPS at the edge (decisions §8, §15): the certificate manager for the hosts Slipway serves, kept in step with the routing table and with the other instances.
import type { Config } from '../config.js';
import { watcherTask, type BackgroundTask } from '../core/background.js';
import type { Coordination } from '../deploy/coordination.js';
import type { AppEvents } from '../domain/app-events.js';
import type { AcmeIssuerOptions } from './acme-issuer.js';
import { CertificateManager } from './certificate-manager.js';
import { certificateAnnouncer, syncCertificates } from './certificate-sync.js';
import type { CertificateIssuer, CertificateRepository } from './certificates.js';
import type { HttpChallenges } from './http-challenges.js';
import { loadOperatorCertificate } from './operator-certificate.js';

/** How long an instance told of another's new custom domain waits before asking for its certificate itself. */
const FOLLOWER_ENSURE_DELAY_MS = 3_000;
/** How often the leader looks for due renewals and retries. */
const RENEW_POLL_MS = 10 * 60_000;

/** The routing table as certificates follow it: app routes and custom hosts coming and going. */
export interface ServedHosts {
  subscribe(listener: (subdomain: string, route: { readonly kind: string; readonly state?: string } | undefined) => void): () => void;
  subscribeHosts(listener: (hostname: string, alias: unknown) => void): () => void;
  resolveHost(host: string): { readonly route?: { readonly kind: string; readonly deploymentId?: string } | undefined } | null;
  entries(): Iterable<readonly [string, { readonly kind: string; readonly state?: string }]>;
  hosts(): Iterable<readonly [string, unknown]>;
}

export interface EdgeCertificatesDeps {
  readonly config: Config;
  readonly https: NonNullable<Config['https']>;
  /** acme-client's issuer, loaded only when HTTPS is on (a large part of the start-up's module loading). */
  readonly createIssuer: (options: AcmeIssuerOptions) => CertificateIssuer;
  readonly repository: CertificateRepository;
  readonly challenges: HttpChallenges;
  readonly table: ServedHosts;
  readonly coordination: Coordination;
  /** This instance's id: the announcements of its own changes carry it. */
  readonly self: string;
  /** Several instances may share the database: follow their certificates through the feed. */
  readonly shared: boolean;
  readonly resyncMs: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
  /** Where `certificate.failed` is told (notifications). */
  readonly events?: Pick<AppEvents, 'emit'> | undefined;
}

/**
 * The manager, wired: it orders for app and custom hosts as they come, drops them as they go, and
 * follows the other instances. `tasks` (for the server's background work): the leader's renewals,
 * and on a shared database the sync with the other instances.
 */
export function startEdgeCertificates(deps: EdgeCertificatesDeps): { certificates: CertificateManager; tasks: BackgroundTask[]; start(): Promise<void>; stop(): void } {
  const { config, https, table, coordination, log } = deps;
  const certificates = new CertificateManager({
    repository: deps.repository,
    issuer: deps.createIssuer({ directoryUrl: https.acmeDirectoryUrl, email: https.acmeEmail, caFile: https.acmeCaFile, repository: deps.repository, challenges: deps.challenges }),
    operator: https.certFile !== undefined && https.keyFile !== undefined ? loadOperatorCertificate(https.certFile, https.keyFile) : undefined,
    // Only these: the API host, an app's subdomain, a custom domain (never a tunnel, never any other name).
    isServed: (host) => host === config.domain || table.resolveHost(host)?.route?.kind === 'app',
    log,
    // Issued once across instances, served by all; renewals and retries are the leader's (decisions §15).
    lock: (host, signal) => coordination.lockHost(host, signal),
    announce: certificateAnnouncer(coordination, deps.self),
    isLeader: () => coordination.isLeader(),
    onFailure: (hostname, message) => deps.events?.emit({ type: 'certificate.failed', hostname, deploymentId: table.resolveHost(hostname)?.route?.deploymentId ?? null, message }),
  });
  const dropped = (err: unknown): void => log('warn', 'could not drop a certificate', { error: err });
  const appHost = (subdomain: string): string => `${subdomain}.${config.domain}`;
  const unsubscribeApps = table.subscribe((subdomain, route) => {
    if (route?.kind === 'app' && route.state === 'live') certificates.ensure(appHost(subdomain));
    else if (route === undefined) void certificates.hostRemoved(appHost(subdomain)).catch(dropped);
  });
  const unsubscribeHosts = table.subscribeHosts((hostname, alias) => {
    // The instance a domain is added on orders at once (`hostAdded`); the others, told by the feed,
    // look a little later: by then it holds the host's lock, so they wait and serve what it stores.
    if (alias !== undefined) setTimeout(() => certificates.ensure(hostname), FOLLOWER_ENSURE_DELAY_MS).unref();
    else void certificates.hostRemoved(hostname).catch(dropped);
  });
  const tasks: BackgroundTask[] = [
    // Renewals and retries are the leader's: a look every RENEW_POLL_MS, and at once on becoming the leader.
    { name: 'looking for due certificate renewals', scope: 'leaderOnly', everyMs: RENEW_POLL_MS, immediately: true, run: () => certificates.renewDue() },
  ];
  // Other instances' certificates reach this edge through the coordination feed (one instance: nothing to follow).
  if (deps.shared) {
    tasks.push(watcherTask('following certificates across instances', 'everyInstance', () => syncCertificates({ coordination, certificates, self: deps.self, resyncMs: deps.resyncMs, log })));
  }
  return {
    certificates,
    tasks,
    // Hosts served now: the API host, every live app, every custom domain; then stored records (renewals, retries).
    start: async () => {
      certificates.ensure(config.domain);
      for (const [subdomain, route] of table.entries()) if (route.kind === 'app' && route.state === 'live') certificates.ensure(appHost(subdomain));
      for (const [hostname] of table.hosts()) certificates.ensure(hostname);
      await certificates.start();
    },
    stop: () => {
      unsubscribeApps();
      unsubscribeHosts();
    },
  };
}
