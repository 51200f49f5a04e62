// The HTTPS part (decisions §8): certificates for the hosts Slipway serves, ACME challenges, and the plain port's 308s.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config.js';
import type { Background } from '../core/background.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import type { Coordination } from '../deploy/coordination.js';
import type { AppEvents } from '../domain/app-events.js';
import { NO_CERTIFICATES, type DomainCertificates } from '../domain/custom-domains.js';
import { requestHeadProblem } from '../proxy/request-guard.js';
import type { CertificateManager } from './certificate-manager.js';
import type { CertificateRepository } from './certificates.js';
import { startEdgeCertificates, type ServedHosts } from './edge-certificates.js';
import { HttpChallenges, type ChallengeStore } from './http-challenges.js';
import { hostOf, redirectToHttps } from './https-redirect.js';

/** How often the certificates other instances stored are read again (several instances). */
const RESYNC_MS = 10_000;

export interface HttpsPartDeps {
  readonly config: Config;
  readonly log: Log;
  readonly self: string;
  readonly coordination: Coordination;
  /** Challenge answers live in the database: the CA may reach any instance (decisions §15). */
  readonly challenges: ChallengeStore;
  readonly repository: CertificateRepository;
  readonly table: ServedHosts;
  /** Where `certificate.failed` is told (notifications). */
  readonly events?: Pick<AppEvents, 'emit'>;
  /** Where the leader's renewals and the sync across instances are registered. */
  readonly background: Pick<Background, 'add'>;
}

/** HTTPS at the edge, while it is on. */
export interface EdgeHttps {
  readonly certificates: CertificateManager;
  /** A plain request's first look: an ACME challenge, or a 308 to https when its host has a certificate. True when answered. */
  answerPlain(req: IncomingMessage, res: ServerResponse, httpsPort: number): boolean;
  /** Whether the host a Host header names has a certificate (its plain requests get a 308). */
  hasCertificate(hostHeader: string | undefined): boolean;
}

export interface HttpsOffers {
  /** Undefined while HTTPS is off (SLIPWAY_HTTPS_PORT unset). */
  readonly edge: EdgeHttps | undefined;
  /** Custom domains' certificates as the API shows them (NO_CERTIFICATES while HTTPS is off). */
  readonly domainCertificates: DomainCertificates;
  /** Orders the certificates of the hosts served now, then renewals: once the edge listens (the CA validates through it). */
  orderCertificates(): Promise<void>;
}

/** Builds the certificate manager when HTTPS is on; acme-client is loaded only then (a large part of start-up's module loading). */
export async function httpsPart(deps: HttpsPartDeps): Promise<Part<HttpsOffers>> {
  const { config, log } = deps;
  if (config.https === undefined) return { offers: { edge: undefined, domainCertificates: NO_CERTIFICATES, orderCertificates: async () => undefined } };
  const challenges = new HttpChallenges(deps.challenges, log);
  const managed = startEdgeCertificates({
    config,
    https: config.https,
    createIssuer: (await import('./acme-issuer.js')).createAcmeIssuer,
    repository: deps.repository,
    challenges,
    table: deps.table,
    coordination: deps.coordination,
    self: deps.self,
    shared: config.databaseUrl !== undefined,
    resyncMs: RESYNC_MS,
    log,
    events: deps.events,
  });
  const { certificates } = managed;
  for (const task of managed.tasks) deps.background.add(task);
  const edge: EdgeHttps = {
    certificates,
    answerPlain: (req, res, httpsPort) => {
      try {
        return requestHeadProblem(req) === undefined && (challenges.handle(req, res) || redirectToHttps(req, res, httpsPort, (host) => certificates.hasCertificate(host)));
      } catch (err) {
        log('error', 'HTTPS redirect threw', { url: req.url, error: err });
        return false;
      }
    },
    hasCertificate: (hostHeader) => certificates.hasCertificate(hostOf(hostHeader) ?? ''),
  };
  return {
    offers: { edge, domainCertificates: certificates, orderCertificates: () => managed.start() },
    stop: async () => {
      managed.stop();
      await certificates.close();
    },
  };
}
