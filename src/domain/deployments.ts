// Deployment use-cases on the control plane: create, list, get, delete, and how a deployment is shown.
import { composePathChange, composePathOnCreate, normalizeSourcePath } from './compose-path.js';
import { deploymentRecord } from './audit.js';
import crypto from 'node:crypto';
import { nowIso } from '../core/now.js';
import type { DeploymentRow } from './deployment-rows.js';
import { validateBranchName, validateRepoUrl } from '../source/git-url.js';
import { normalizeSubdomain } from '../core/dns-label.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { authorizeDeployment, authorizeTeam, type DeploymentAction } from './policy.js';
import { type DeploymentCatalog, type DeploymentChanges, type ShownDeployment } from './deployment-catalog.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';
import { normalizeVolumes, parseStoredVolumes, type VolumeSpec } from './volumes.js';
import { mergePendingKeys, parsePendingKeys, pendingSettingKeys } from './config-pending.js';
import { HEALTH_OK, type AppHealth } from './app-health.js';

export type { DeploymentRow };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A path id that is not a UUID can name nothing: the same 404 as a missing object. */
export function assertUuid(id: string, what: string): void {
  if (!UUID.test(id)) throw new DomainError('not_found', `${what} not found`);
}

/** Checks a Dockerfile path: relative, inside the source, no `..`. Returns it normalized. */
export function normalizeDockerfilePath(value: string | undefined): string {
  return value === undefined ? 'Dockerfile' : normalizeSourcePath(value, 'dockerfile_path');
}

export interface CreateDeploymentInput {
  name: string;
  subdomain: string;
  source_type?: 'git' | 'archive' | undefined;
  repo_url?: string | undefined;
  branch?: string | undefined;
  dockerfile_path?: string | undefined;
  /** The compose file (contract §21), exclusive with dockerfile_path. */
  compose_path?: string | undefined;
  health_check_path?: string | undefined;
  memory_mb?: number | undefined;
  cpus?: number | undefined;
  volumes?: Array<{ name: string; mount_path: string }> | undefined;
  replicas?: number | undefined;
  auto_deploy?: boolean | undefined;
  previews?: boolean | undefined;
  /** The team the deployment belongs to (the caller must be its owner); absent: the caller's own. */
  team_id?: string | undefined;
}

export interface DeploymentDeps {
  readonly deployments: DeploymentCatalog;
  readonly allowPrivateGit: boolean;
  /** Refuses repository hosts on private addresses (unless allowed); throws validation_error. */
  readonly checkRepoHost: (repoUrl: string) => Promise<void>;
  /** Ceilings of a deployment's resources (SLIPWAY_MAX_MEMORY_MB, SLIPWAY_MAX_CPUS). */
  readonly limits: ResourceCeilings;
}

export interface ResourceCeilings {
  readonly maxMemoryMb: number;
  readonly maxCpus: number;
}

const validationError = (message: string): DomainError => new DomainError('validation_error', message);

function checkName(value: string): string {
  const name = value.trim();
  if (name.length < 1 || name.length > 100) throw validationError('name must be 1 to 100 characters');
  return name;
}

function checkRepoUrl(value: string, allowFile: boolean): string {
  const problem = validateRepoUrl(value, { allowFile });
  // The validator's messages name the field already ("repo_url must not…").
  if (problem !== null) throw validationError(problem.startsWith('repo_url') ? problem : `repo_url: ${problem}`);
  return value;
}

function checkBranch(value: string): string {
  const problem = validateBranchName(value);
  if (problem !== null) throw validationError(problem.startsWith('branch') ? problem : `branch: ${problem}`);
  return value;
}

function checkHealthCheckPath(value: string): string {
  if (!/^\/[\x21-\x7e]{0,511}$/.test(value)) throw validationError('health_check_path must be a path starting with "/"');
  return value;
}

function checkMemoryBytes(memoryMb: number, limits: ResourceCeilings): number {
  if (!Number.isInteger(memoryMb) || memoryMb < 16 || memoryMb > limits.maxMemoryMb) {
    throw validationError(`memory_mb must be a whole number from 16 to ${limits.maxMemoryMb} (this server's ceiling)`);
  }
  return memoryMb * 1024 * 1024;
}

function checkNanoCpus(cpus: number, limits: ResourceCeilings): number {
  if (!(cpus >= 0.01 && cpus <= limits.maxCpus)) throw validationError(`cpus must be from 0.01 to ${limits.maxCpus} (this server's ceiling)`);
  return Math.round(cpus * 1e9);
}

/** Most replicas a deployment may ask for (decisions §16). */
export const MAX_REPLICAS = 20;

function checkReplicas(replicas: number): number {
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > MAX_REPLICAS) throw validationError(`replicas must be a whole number from 1 to ${MAX_REPLICAS}`);
  return replicas;
}

/** Volumes are local to one engine (one node): a deployment with volumes runs one replica (decisions §16). */
function checkReplicasWithVolumes(replicas: number, volumes: string): void {
  if (replicas > 1 && parseStoredVolumes(volumes).length > 0) {
    throw validationError('replicas must be 1 for a deployment with volumes (a volume lives on one node and is not shared between replicas)');
  }
}

function validateCreate(input: CreateDeploymentInput, allowFile: boolean, limits: ResourceCeilings): Omit<DeploymentRow, 'id' | 'user_id' | 'team_id' | 'created_at' | 'updated_at' | 'seq' | 'config_pending'> {
  const name = checkName(input.name);
  const subdomain = normalizeSubdomain(input.subdomain);
  const sourceType = input.source_type ?? 'git';
  const dockerfilePath = normalizeDockerfilePath(input.dockerfile_path);
  let repoUrl: string | null = null;
  let branch: string | null = null;
  if (sourceType === 'archive') {
    if (input.repo_url !== undefined || input.branch !== undefined) {
      throw validationError('repo_url and branch are for git deployments; an archive deployment takes an upload');
    }
    if (input.auto_deploy === true) throw autoDeployNeedsGit();
    if (input.previews === true) throw previewsNeedGit();
  } else {
    if (input.repo_url === undefined) throw validationError('repo_url is required for a git deployment');
    repoUrl = checkRepoUrl(input.repo_url, allowFile);
    if (input.branch !== undefined) branch = checkBranch(input.branch);
  }
  return {
    name,
    subdomain,
    source_type: sourceType,
    repo_url: repoUrl,
    branch,
    dockerfile_path: dockerfilePath,
    compose_path: composePathOnCreate(input),
    status: 'pending',
    upload_id: null,
    upload_size: null,
    upload_sha256: null,
    live_build_id: null,
    health_check_path: input.health_check_path === undefined ? null : checkHealthCheckPath(input.health_check_path),
    memory_bytes: input.memory_mb === undefined ? null : checkMemoryBytes(input.memory_mb, limits),
    nano_cpus: input.cpus === undefined ? null : checkNanoCpus(input.cpus, limits),
    volumes: JSON.stringify(normalizeVolumes(input.volumes ?? [])),
    replicas: input.replicas === undefined ? 1 : checkReplicas(input.replicas),
    auto_deploy: input.auto_deploy === true ? 1 : 0,
    previews: input.previews === true ? 1 : 0,
    // Not a preview (those are created by pull request events: domain/preview-events.ts).
    parent_id: null,
    pr_number: null,
    pr_head_sha: null,
    pr_head_repo: null,
    pr_same_repo: 0,
  };
}

/** Deploy on push needs a repository to push to (decisions §10); `false` is accepted everywhere. */
const autoDeployNeedsGit = (): DomainError => validationError('auto_deploy is for git deployments (an archive deployment has nothing to push to)');
/** Previews are built from pull requests (decisions §17); `false` is accepted everywhere. */
const previewsNeedGit = (): DomainError => validationError('previews are for git deployments (an archive deployment has no pull requests)');

/** Settings that can change after creation; they take effect at the next deploy or restart. null resets to the default. */
export interface UpdateDeploymentInput {
  name?: string | undefined;
  repo_url?: string | undefined;
  branch?: string | null | undefined;
  dockerfile_path?: string | undefined;
  /** A compose file (contract §21); null: back to the Dockerfile. Exclusive with dockerfile_path. */
  compose_path?: string | null | undefined;
  health_check_path?: string | null | undefined;
  memory_mb?: number | null | undefined;
  cpus?: number | null | undefined;
  /** The whole list (replaces the old one); a volume left out keeps its data until the deployment is deleted. */
  volumes?: Array<{ name: string; mount_path: string }> | undefined;
  /** Copies that serve the app (1–20); applies at the next deploy, restart or rollback. */
  replicas?: number | undefined;
  /** git deployments: a verified push to the tracked branch deploys the pushed commit. */
  auto_deploy?: boolean | undefined;
  /** git deployments: pull requests against the tracked branch get previews. */
  previews?: boolean | undefined;
}

/** Changes a deployment's settings (not its subdomain or source type). */
export async function updateDeployment(
  deps: DeploymentDeps,
  principal: Principal,
  id: string,
  input: UpdateDeploymentInput,
): Promise<DeploymentRow> {
  const row = await getDeploymentRow(deps.deployments, principal, id, 'change');
  if (Object.values(input).every((v) => v === undefined)) throw validationError('nothing to change: send at least one field');
  const changes: DeploymentChanges = {};
  if (input.name !== undefined) changes.name = checkName(input.name);
  if (input.dockerfile_path !== undefined) changes.dockerfile_path = normalizeDockerfilePath(input.dockerfile_path);
  Object.assign(changes, composePathChange(input));
  if (input.health_check_path !== undefined) {
    changes.health_check_path = input.health_check_path === null ? null : checkHealthCheckPath(input.health_check_path);
  }
  if (input.memory_mb !== undefined) changes.memory_bytes = input.memory_mb === null ? null : checkMemoryBytes(input.memory_mb, deps.limits);
  if (input.cpus !== undefined) changes.nano_cpus = input.cpus === null ? null : checkNanoCpus(input.cpus, deps.limits);
  if (input.volumes !== undefined) changes.volumes = JSON.stringify(normalizeVolumes(input.volumes));
  if (input.replicas !== undefined) changes.replicas = checkReplicas(input.replicas);
  checkReplicasWithVolumes(changes.replicas ?? row.replicas, changes.volumes ?? row.volumes);
  if (input.auto_deploy !== undefined) {
    if (input.auto_deploy && row.source_type !== 'git') throw autoDeployNeedsGit();
    changes.auto_deploy = input.auto_deploy ? 1 : 0;
  }
  if (input.previews !== undefined) {
    if (input.previews && row.source_type !== 'git') throw previewsNeedGit();
    changes.previews = input.previews ? 1 : 0;
  }
  if (input.repo_url !== undefined || input.branch !== undefined) {
    if (row.source_type !== 'git') throw validationError('repo_url and branch are for git deployments');
    if (input.repo_url !== undefined) {
      changes.repo_url = checkRepoUrl(input.repo_url, deps.allowPrivateGit);
      await deps.checkRepoHost(changes.repo_url);
    }
    if (input.branch !== undefined) changes.branch = input.branch === null ? null : checkBranch(input.branch);
  }
  const pending = row.live_build_id === null ? [] : pendingSettingKeys(row, changes);
  if (pending.length > 0) changes.config_pending = mergePendingKeys(row.config_pending, pending);
  await deps.deployments.update(row.id, changes, deploymentRecord(principal, row, 'deployment.update'));
  return getDeploymentRow(deps.deployments, principal, id, 'read');
}

/**
 * Creates a deployment. Its subdomain is claimed in the one table of claims (deployments and live
 * tunnels alike): the claim's primary key decides, so two concurrent creates cannot both win.
 */
export async function createDeployment(deps: DeploymentDeps, principal: Principal, input: CreateDeploymentInput): Promise<DeploymentRow> {
  // A team's deployment is created by its owners (an outsider: the team is not found).
  const teamId = input.team_id ?? null;
  if (teamId !== null) authorizeTeam(principal, teamId, 'owner');
  const fields = validateCreate(input, deps.allowPrivateGit, deps.limits);
  checkReplicasWithVolumes(fields.replicas, fields.volumes);
  if (fields.repo_url !== null) await deps.checkRepoHost(fields.repo_url);
  const now = nowIso();
  const id = crypto.randomUUID();
  const created = await deps.deployments.create(
    { ...fields, id, user_id: principal.userId, team_id: teamId, created_at: now, updated_at: now },
    deploymentRecord(principal, { id, team_id: teamId }, 'deployment.create'),
  );
  if (created === 'subdomain_taken') throw subdomainTaken(fields.subdomain);
  return getDeploymentRow(deps.deployments, principal, id, 'read');
}

const subdomainTaken = (subdomain: string): DomainError =>
  new DomainError('subdomain_taken', `subdomain "${subdomain}" is already in use`);

/** A position in the list of deployments: the creation sequence number (unique, so no ties). */
export type DeploymentPosition = readonly [seq: number];

/**
 * A page of the caller's deployments, newest first (only what is shown: a list is read on every
 * dashboard refresh). Keyset on `seq`, indexed with the owner: a page starts after the last one's
 * final item whatever was created or deleted since.
 */
export async function listDeployments(
  catalog: DeploymentCatalog,
  principal: Principal,
  page: PageRequest<DeploymentPosition>,
): Promise<Page<ShownDeployment & { seq: number }, DeploymentPosition>> {
  const rows = await catalog.deployments(principal.userId, [...(principal.teams?.keys() ?? [])], page.after?.[0], page.limit + 1);
  return pageFromRows(rows, page.limit, (row) => [row.seq] as const);
}

/**
 * A deployment the caller may `action` (the policy, src/domain/policy.ts): missing, not a UUID,
 * another user's or a team's the caller is not in → 404; a member without the role → 403.
 */
export async function getDeploymentRow(catalog: DeploymentCatalog, principal: Principal, id: string, action: DeploymentAction): Promise<DeploymentRow> {
  assertUuid(id, 'deployment');
  const row = await catalog.deployment(id);
  // A preview is a deployment row underneath, but the API shows it only under its deployment (decisions §17).
  return authorizeDeployment(principal, row?.parent_id == null ? row : undefined, action);
}

/** The id of a deployment the caller may `action` (as `getDeploymentRow`), reading only what that needs. */
export async function getOwnedDeploymentId(catalog: DeploymentCatalog, principal: Principal, id: string, action: DeploymentAction): Promise<string> {
  assertUuid(id, 'deployment');
  const row = await catalog.owner(id);
  return authorizeDeployment(principal, row, action).id;
}

/** Fields a deployment shows; the archive creation response has exactly the first seven. */
export interface DeploymentView {
  id: string;
  name: string;
  subdomain: string;
  status: DeploymentRow['status'];
  source_type: DeploymentRow['source_type'];
  created_at: string;
  updated_at: string;
  repo_url?: string;
  branch?: string | null;
  dockerfile_path?: string;
  compose_path?: string | null;
  url?: string;
  live_build_id?: string | null;
  health_check_path?: string | null;
  memory_mb?: number | null;
  cpus?: number | null;
  volumes?: VolumeSpec[];
  replicas?: number;
  auto_deploy?: boolean;
  previews?: boolean;
  team_id?: string | null;
  /** Configuration changed since the live release (it applies at the next deploy, restart or rollback). */
  config_pending?: boolean;
  /** Which keys: variable names, or settings (`volumes`, `memory_mb`, `cpus`, `replicas`, `health_check_path`). */
  config_pending_keys?: string[];
  /** Uploaded deployments: whether a source was uploaded (a deploy needs one). */
  uploaded?: boolean;
  /** Whether the live release keeps crashing (status alone says `running`). */
  health?: AppHealth;
}

/** The archive creation response: exactly these keys (decisions §4). */
export function presentCreatedArchive(row: ShownDeployment): DeploymentView {
  return {
    id: row.id,
    name: row.name,
    subdomain: row.subdomain,
    status: row.status,
    source_type: row.source_type,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** The full view of a deployment, with where it is served. */
export function presentDeployment(row: ShownDeployment, urlFor: (subdomain: string) => string, health: AppHealth = HEALTH_OK): DeploymentView {
  // Object literals written out in full: every view of a kind gets the same shape, cheap to build
  // and to serialize (spreading one object into another here cost more than the whole query).
  const memory_mb = row.memory_bytes === null ? null : row.memory_bytes / (1024 * 1024);
  const cpus = row.nano_cpus === null ? null : row.nano_cpus / 1e9;
  const config_pending_keys = parsePendingKeys(row.config_pending);
  if (row.source_type === 'git') {
    return {
      id: row.id,
      name: row.name,
      subdomain: row.subdomain,
      status: row.status,
      source_type: row.source_type,
      created_at: row.created_at,
      updated_at: row.updated_at,
      repo_url: row.repo_url ?? '',
      branch: row.branch,
      dockerfile_path: row.dockerfile_path,
      compose_path: row.compose_path ?? null,
      url: urlFor(row.subdomain),
      live_build_id: row.live_build_id,
      health_check_path: row.health_check_path,
      memory_mb,
      cpus,
      volumes: parseStoredVolumes(row.volumes),
      replicas: row.replicas,
      auto_deploy: row.auto_deploy === 1,
      previews: row.previews === 1,
      team_id: row.team_id,
      config_pending: config_pending_keys.length > 0,
      config_pending_keys,
      health,
    };
  }
  return {
    id: row.id,
    name: row.name,
    subdomain: row.subdomain,
    status: row.status,
    source_type: row.source_type,
    created_at: row.created_at,
    updated_at: row.updated_at,
    dockerfile_path: row.dockerfile_path,
    compose_path: row.compose_path ?? null,
    url: urlFor(row.subdomain),
    live_build_id: row.live_build_id,
    health_check_path: row.health_check_path,
    memory_mb,
    cpus,
    volumes: parseStoredVolumes(row.volumes),
    team_id: row.team_id,
    replicas: row.replicas,
    uploaded: row.upload_id !== null,
    config_pending: config_pending_keys.length > 0,
    config_pending_keys,
    health,
  };
}
