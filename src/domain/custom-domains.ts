// Custom domains use-cases: a deployment also served at hostnames its owner names (decisions §8).
import { deploymentRecord, type AuditRecord } from './audit.js';
import crypto from 'node:crypto';
import { DomainError } from '../core/errors.js';
import { normalizeHostname } from '../core/hostname.js';
import type { Principal } from '../core/principal.js';
import { nowIso } from '../core/now.js';
import type { DeploymentCatalog } from './deployment-catalog.js';
import { assertUuid, getDeploymentRow } from './deployments.js';

/** At most this many custom domains per deployment (decisions §8). */
export const MAX_DOMAINS_PER_DEPLOYMENT = 20;

/** A host's certificate state as the API shows it. */
export interface TlsView {
  tls_status: 'none' | 'pending' | 'active' | 'failed';
  tls_error: string | null;
  certificate_expires_at: string | null;
}

/** A custom domain as the API shows it. */
export interface DomainView extends TlsView {
  id: string;
  deployment_id: string;
  hostname: string;
  created_at: string;
}

/** Where a deployment's extra hostnames are routed (the routing table): they reach it exactly as its subdomain does. */
export interface HostRoutes {
  addHost(hostname: string, deployment: { id: string; subdomain: string }): void;
  removeHost(hostname: string): void;
}

/** HTTPS for custom domains: their certificates' state, and when to get (or drop) one. */
export interface DomainCertificates {
  /** The state of each hostname's certificate (`none` for all when HTTPS is off). */
  statuses(hostnames: readonly string[]): Promise<Map<string, TlsView>>;
  /** A hostname began to be served: a certificate is obtained in the background if it needs one. */
  hostAdded(hostname: string): void;
  /** A hostname is served no more: its certificate is dropped. */
  hostRemoved(hostname: string): Promise<void>;
}

/** A hostname a deployment is also served at (lower case A-label, unique across all users). */
export interface CustomDomainRow {
  id: string;
  deployment_id: string;
  hostname: string;
  created_at: string;
}

/** The custom domains' records; implemented over the database in src/db/custom-domain-store.ts. */
export interface CustomDomainStore {
  /**
   * Records `row`, checked under its deployment's lock (two concurrent adds cannot both see room):
   * `taken` if another deployment or this one holds the hostname, `full` if the deployment has
   * `max` domains already, `gone` if the deployment no longer exists.
   */
  add(row: CustomDomainRow, max: number, audit?: AuditRecord): Promise<'added' | 'taken' | 'full' | 'gone'>;
  /** A deployment's domains, oldest first (ties by hostname). */
  list(deploymentId: string): Promise<CustomDomainRow[]>;
  /** Removes the deployment's domain `id` and returns it; undefined when the deployment has no such domain. */
  remove(deploymentId: string, id: string, audit?: (removed: CustomDomainRow) => AuditRecord): Promise<CustomDomainRow | undefined>;
}

export interface CustomDomainDeps {
  readonly domains: CustomDomainStore;
  readonly deployments: DeploymentCatalog;
  /** SLIPWAY_DOMAIN: neither it nor a name under it can be a custom domain. */
  readonly appDomain: string;
  readonly routes: HostRoutes;
  readonly certificates: DomainCertificates;
}

/** Certificates when HTTPS is off: every domain is `none`, nothing is ever requested. */
export const NO_CERTIFICATES: DomainCertificates = {
  statuses: async (hostnames) => new Map(hostnames.map((h) => [h, { tls_status: 'none', tls_error: null, certificate_expires_at: null }])),
  hostAdded: () => undefined,
  hostRemoved: async () => undefined,
};

const domainTaken = (hostname: string): DomainError => new DomainError('domain_taken', `hostname "${hostname}" is already in use`);

/** Adds a hostname to the caller's deployment; it is routed at once and gets a certificate in the background. */
export async function addDomain(deps: CustomDomainDeps, principal: Principal, deploymentId: string, input: { hostname: string }): Promise<DomainView> {
  const dep = await getDeploymentRow(deps.deployments, principal, deploymentId, 'change');
  const normalized = normalizeHostname(input.hostname, deps.appDomain);
  if ('problem' in normalized) throw new DomainError('validation_error', normalized.problem);
  const { hostname } = normalized;
  const row = { id: crypto.randomUUID(), deployment_id: dep.id, hostname, created_at: nowIso() };
  const added = await deps.domains.add(row, MAX_DOMAINS_PER_DEPLOYMENT, deploymentRecord(principal, dep, 'domain.add', 'domain', row.id));
  if (added === 'gone') throw new DomainError('not_found', 'deployment not found');
  if (added === 'taken') throw domainTaken(hostname);
  if (added === 'full') throw new DomainError('validation_error', `a deployment has at most ${MAX_DOMAINS_PER_DEPLOYMENT} custom domains`);
  deps.routes.addHost(hostname, { id: dep.id, subdomain: dep.subdomain });
  deps.certificates.hostAdded(hostname);
  return present(row, (await deps.certificates.statuses([hostname])).get(hostname));
}

/** The caller's deployment's custom domains, oldest first. */
export async function listDomains(deps: CustomDomainDeps, principal: Principal, deploymentId: string): Promise<DomainView[]> {
  const dep = await getDeploymentRow(deps.deployments, principal, deploymentId, 'read');
  const rows = await deps.domains.list(dep.id);
  const tls = await deps.certificates.statuses(rows.map((r) => r.hostname));
  return rows.map((r) => present(r, tls.get(r.hostname)));
}

/** Removes one of the deployment's domains: it is no longer routed, and its certificate is dropped. */
export async function removeDomain(deps: CustomDomainDeps, principal: Principal, deploymentId: string, domainId: string): Promise<void> {
  const dep = await getDeploymentRow(deps.deployments, principal, deploymentId, 'change');
  assertUuid(domainId, 'domain');
  const row = await deps.domains.remove(dep.id, domainId, (removed) => deploymentRecord(principal, dep, 'domain.remove', 'domain', removed.id));
  if (row === undefined) throw new DomainError('not_found', 'domain not found');
  deps.routes.removeHost(row.hostname);
  await deps.certificates.hostRemoved(row.hostname);
}

function present(row: CustomDomainRow, tls: TlsView | undefined): DomainView {
  return {
    id: row.id,
    deployment_id: row.deployment_id,
    hostname: row.hostname,
    created_at: row.created_at,
    tls_status: tls?.tls_status ?? 'pending',
    tls_error: tls?.tls_error ?? null,
    certificate_expires_at: tls?.certificate_expires_at ?? null,
  };
}
