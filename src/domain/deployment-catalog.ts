// The deployment catalog: the port through which the API's use-cases read deployments and builds and create or edit deployments.
import type { UsedDockerfile } from './used-dockerfile.js';
import type { AuditRecord } from './audit.js';
import type { BuildRow, DeploymentRow } from './deployment-rows.js';

/** The columns a deployment's view is made of (a list reads only these). */
export const SHOWN_DEPLOYMENT_COLUMNS = [
  'id',
  'name',
  'subdomain',
  'status',
  'source_type',
  'created_at',
  'updated_at',
  'repo_url',
  'branch',
  'dockerfile_path',
  'compose_path',
  'live_build_id',
  'health_check_path',
  'memory_bytes',
  'nano_cpus',
  'volumes',
  'replicas',
  'auto_deploy',
  'previews',
  'team_id',
  'config_pending',
  'upload_id',
] as const;

/** What `presentDeployment` shows of a deployment. */
export type ShownDeployment = Pick<DeploymentRow, (typeof SHOWN_DEPLOYMENT_COLUMNS)[number]>;

/** The columns a build's view is made of, with its position in the list. */
export const SHOWN_BUILD_COLUMNS = ['id', 'deployment_id', 'status', 'commit_sha', 'started_at', 'finished_at', 'error', 'seq'] as const;

/** What a list of builds shows of a build. */
export type ShownBuild = Pick<BuildRow, (typeof SHOWN_BUILD_COLUMNS)[number]>;

/** A deployment about to be created (the catalog assigns its order). */
export type NewDeployment = Omit<DeploymentRow, 'seq' | 'config_pending'>;

/** Settings of a deployment a use-case may change. */
export type DeploymentChanges = Partial<
  Pick<DeploymentRow, 'name' | 'repo_url' | 'branch' | 'dockerfile_path' | 'compose_path' | 'health_check_path' | 'memory_bytes' | 'nano_cpus' | 'volumes' | 'replicas' | 'auto_deploy' | 'previews' | 'config_pending'>
>;

/**
 * The deployments and builds as the API's use-cases see them. The lifecycle's reads and writes go
 * through `DeploymentStore` (src/deploy/); both are implemented over the database in src/db/, the
 * only place that queries those tables. Pages are keyset on `seq`, newest first: `before` is the
 * last `seq` of the previous page, and `limit` rows at most are returned.
 */
export interface DeploymentCatalog {
  /** One deployment, whoever owns it. */
  deployment(id: string): Promise<DeploymentRow | undefined>;
  /** Who owns a deployment (reads only that). */
  owner(id: string): Promise<{ id: string; user_id: string; team_id: string | null } | undefined>;
  /** A user's own deployments and those of the teams given (theirs), newest first (previews are listed under their deployment, not here). */
  deployments(userId: string, teamIds: readonly string[], before: number | undefined, limit: number): Promise<Array<ShownDeployment & { seq: number }>>;
  /**
   * The version of a user's deployment list: it changes, in the same transaction, with every write
   * that changes what the list shows (create, edit, upload, status, live build, delete), whichever
   * process or instance makes it. Equal versions mean equal lists, so a page may be cached by it.
   */
  listVersion(userId: string): Promise<number>;
  /**
   * Creates a deployment and its subdomain claim in one transaction (the claim's primary key
   * decides between concurrent creates). Returns `subdomain_taken` when the subdomain is claimed.
   */
  create(deployment: NewDeployment, audit?: AuditRecord): Promise<'created' | 'subdomain_taken'>;
  /** With `audit`, the entry is appended in the write's transaction (as for `create` and `setUpload`). */
  update(id: string, changes: DeploymentChanges, audit?: AuditRecord): Promise<void>;
  /**
   * Adds `keys` to the configuration changed since the live release (a deployment with no release
   * yet has nothing pending: its first release takes the configuration as it is). A release clears it.
   */
  markConfigPending(id: string, keys: readonly string[]): Promise<void>;
  /** Makes an upload the deployment's source. Returns false if the deployment is gone. */
  setUpload(id: string, upload: { id: string; size: number; sha256: string }, audit?: AuditRecord): Promise<boolean>;
  /** The uploads a deployment still needs: its current one and those of its builds in flight. */
  uploadsInUse(id: string): Promise<Set<string | null>>;
  /** A deployment's builds, newest first. */
  builds(deploymentId: string, before: number | undefined, limit: number): Promise<ShownBuild[]>;
  /** A build of this deployment (undefined for another deployment's build). */
  build(deploymentId: string, buildId: string): Promise<BuildRow | undefined>;
  /** A build's status (undefined: no such build). */
  buildStatus(buildId: string): Promise<BuildRow['status'] | undefined>;
  /** The Dockerfile a build used (undefined: not recorded). */
  buildDockerfile(buildId: string): Promise<UsedDockerfile | undefined>;
}
