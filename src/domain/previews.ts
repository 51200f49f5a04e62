// Preview deployments (decisions §17): the catalog port, their subdomain, how one is shown, and the API's use-cases.
import type { AuditRecord } from './audit.js';
import { DomainError } from '../core/errors.js';
import { DNS_LABEL } from '../core/dns-label.js';
import type { Principal } from '../core/principal.js';
import type { DeploymentCatalog, NewDeployment } from './deployment-catalog.js';
import { getDeploymentRow, type DeploymentRow } from './deployments.js';
import type { DeploymentAction } from './policy.js';
import type { DeploymentOperations } from './operations.js';

/** Live previews a deployment may have at once. */
export const MAX_PREVIEWS = 10;

/** A preview's settings that follow its deployment, refreshed at every rebuild. */
export type PreviewSettings = Pick<DeploymentRow, 'repo_url' | 'dockerfile_path' | 'compose_path' | 'health_check_path' | 'memory_bytes' | 'nano_cpus'>;

/** The head a preview shows now. */
export interface PreviewHead {
  readonly branch: string | null;
  readonly sha: string;
  readonly headRepo: string | null;
  readonly sameRepo: boolean;
}

/**
 * Previews in the database: each is a deployment row of its own (same lifecycle, routes, builds and
 * logs) with `parent_id` and `pr_number`. Implemented in src/db/preview-catalog.ts.
 */
export interface PreviewCatalog {
  /** A deployment's previews, newest first. */
  list(parentId: string): Promise<DeploymentRow[]>;
  /** The preview of pull request `number`, if there is one. */
  find(parentId: string, number: number): Promise<DeploymentRow | undefined>;
  /**
   * Creates a preview row and claims its subdomain in one transaction, under the parent's row lock
   * (so the limit holds between concurrent events, on any instance). `limit`: the parent already has
   * `max` previews; `exists`: that number has one; `gone`: the parent was deleted.
   */
  create(preview: NewDeployment, max: number, audit?: AuditRecord): Promise<'created' | 'limit' | 'subdomain_taken' | 'exists' | 'gone'>;
  /** Records the head a preview is about to show, with its deployment's current settings. */
  update(previewId: string, head: PreviewHead, settings: PreviewSettings): Promise<void>;
}

/** `<subdomain>-pr-<number>`, or why it cannot be a DNS label. */
export function previewSubdomain(parentSubdomain: string, number: number): { subdomain: string } | { problem: string } {
  const subdomain = `${parentSubdomain}-pr-${number}`;
  return DNS_LABEL.test(subdomain) ? { subdomain } : { problem: `the preview's subdomain "${subdomain}" would be longer than a DNS label's 63 characters` };
}

/** A preview as the API shows it (decisions §17). */
export interface PreviewView {
  id: string;
  deployment_id: string;
  number: number;
  branch: string | null;
  commit_sha: string | null;
  status: DeploymentRow['status'];
  url: string;
  created_at: string;
  updated_at: string;
}

export function presentPreview(row: DeploymentRow, urlFor: (subdomain: string) => string): PreviewView {
  return {
    id: row.id,
    deployment_id: row.parent_id ?? '',
    number: row.pr_number ?? 0,
    branch: row.branch,
    commit_sha: row.pr_head_sha,
    status: row.status,
    url: urlFor(row.subdomain),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface PreviewDeps {
  readonly deployments: DeploymentCatalog;
  readonly previews: PreviewCatalog;
}

/** The previews of one of the caller's deployments, newest first. */
export async function listPreviews(deps: PreviewDeps, principal: Principal, deploymentId: string): Promise<DeploymentRow[]> {
  const parent = await getDeploymentRow(deps.deployments, principal, deploymentId, 'read');
  return deps.previews.list(parent.id);
}

/** One preview of one of the caller's deployments, by its pull request number (404 for anything else). */
export async function getPreview(deps: PreviewDeps, principal: Principal, deploymentId: string, number: string, action: DeploymentAction = 'read'): Promise<DeploymentRow> {
  const parent = await getDeploymentRow(deps.deployments, principal, deploymentId, action);
  const n = /^[1-9][0-9]{0,8}$/.test(number) ? Number(number) : undefined;
  const preview = n === undefined ? undefined : await deps.previews.find(parent.id, n);
  if (preview === undefined) throw new DomainError('not_found', 'preview not found');
  return preview;
}

/** Removes a preview now (containers, image, route, certificate, builds and logs), as closing its pull request does. */
export async function deletePreview(
  deps: PreviewDeps & { readonly operations: DeploymentOperations },
  principal: Principal,
  deploymentId: string,
  number: string,
): Promise<void> {
  // Previews are a developer's to remove (decisions §18), not only an owner's.
  const preview = await getPreview(deps, principal, deploymentId, number, 'change');
  await deps.operations.remove(principal, preview.id, { action: 'change' });
}
