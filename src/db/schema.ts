// Database schema: the row types of every table, as Kysely sees them.
import type { Generated } from 'kysely';

export interface UsersTable {
  id: string;
  email: string;
  password_hash: string;
  is_admin: number;
  created_at: string;
  updated_at: string;
  /**
   * Changes whenever the user's deployment list may show something else (a deployment created,
   * deleted, or its row written): bumped by the deployment store and catalog in the same
   * transaction as the write, so a cached list page of an older version is never served.
   */
  deployments_version: Generated<number>;
  /** The TOTP secret (AES-256-GCM ciphertext under the installation key), pending until `totp_enabled`. */
  totp_secret: string | null;
  totp_enabled: Generated<number>;
  /** The last TOTP time step accepted: a code is usable once. */
  totp_last_step: number | null;
}

export interface SessionsTable {
  id: string;
  user_id: string;
  token_hash: string;
  created_at: string;
  expires_at: string;
}

export interface ApiKeysTable {
  id: string;
  user_id: string;
  name: string;
  key_prefix: string;
  key_hash: string;
  created_at: string;
  last_used_at: string | null;
}

export interface DeploymentsTable {
  id: string;
  user_id: string;
  name: string;
  subdomain: string;
  source_type: 'git' | 'archive';
  repo_url: string | null;
  branch: string | null;
  dockerfile_path: string;
  status: 'pending' | 'building' | 'running' | 'stopped' | 'failed';
  /** Directory name (under uploads/<deployment>) of the current validated upload, if any. */
  upload_id: string | null;
  upload_size: number | null;
  upload_sha256: string | null;
  /** The build whose container serves traffic (or served it last, when stopped). */
  live_build_id: string | null;
  health_check_path: string | null;
  memory_bytes: number | null;
  nano_cpus: number | null;
  /** JSON `[{name, mount_path}]`: the deployment's named volumes. */
  volumes: Generated<string>;
  /** Containers (docker) or tasks (swarm) a release runs, 1–20. */
  replicas: Generated<number>;
  /** 1: a verified push to the tracked branch deploys (git deployments only). */
  auto_deploy: Generated<number>;
  /** 1: pull requests against the tracked branch get preview deployments (git deployments only). */
  previews: Generated<number>;
  /** A preview's deployment (null for a deployment of its own); see migration 2026-11-27-040. */
  parent_id: Generated<string | null>;
  /** A preview's pull request number. */
  pr_number: Generated<number | null>;
  /** The head commit a preview shows (its newest pull request event's). */
  pr_head_sha: Generated<string | null>;
  /** The pull request's head repository as the forge names it. */
  pr_head_repo: Generated<string | null>;
  /** 1: the head repository is the deployment's own (secrets reach the preview). */
  pr_same_repo: Generated<number>;
  /** The team the deployment belongs to; null: its creator's alone. */
  team_id: string | null;
  created_at: string;
  updated_at: string;
  seq: Generated<number>;
}

export interface BuildsTable {
  id: string;
  deployment_id: string;
  status: 'building' | 'succeeded' | 'failed' | 'cancelled';
  commit_sha: string;
  /** git: the branch resolved; archive: the upload id snapshotted at trigger time. */
  source_ref: string;
  error: string | null;
  image_id: string | null;
  /** The release the build runs as now (the runtime's id for it), null when none. */
  container_id: string | null;
  /** JSON `[{host, port}]`: where the release's replicas serve HTTP (null with no release). */
  upstreams: string | null;
  started_at: string;
  finished_at: string | null;
  /** The control-plane instance that runs (ran) the build; null before instances were recorded. */
  runner: string | null;
  seq: Generated<number>;
}

export interface TunnelsTable {
  id: string;
  user_id: string;
  api_key_id: string;
  subdomain: string;
  connected_at: string;
  /** The control-plane instance the tunnel is connected to. */
  runner: string | null;
}

/** Who holds a subdomain: a deployment or a live tunnel. One row per subdomain (its primary key). */
export interface SubdomainClaimsTable {
  subdomain: string;
  kind: 'deployment' | 'tunnel';
  /** The deployment's or the tunnel's id. */
  owner_id: string;
  user_id: string;
  created_at: string;
}

/** One row: this installation's id (engine objects are labelled with it). */
export interface InstanceTable {
  id: string;
  created_at: string;
  /** A value encrypted under the installation key, checked at start (null until first set). */
  key_check: string | null;
}

/** A deployment's variable; `value` is AES-256-GCM ciphertext, never plain text. */
export interface EnvVarsTable {
  deployment_id: string;
  key: string;
  value: string;
  secret: number;
  updated_at: string;
}

/** The variables a build was (last) released with: one encrypted JSON document. */
export interface BuildConfigsTable {
  build_id: string;
  config: string;
  updated_at: string;
}

/** A hostname a deployment is also served at (lower case A-label, unique across all users). */
export interface CustomDomainsTable {
  id: string;
  deployment_id: string;
  hostname: string;
  created_at: string;
}

/** A certificate obtained by ACME for one served host; `key_pem` is AES-256-GCM ciphertext. */
export interface CertificatesTable {
  hostname: string;
  status: 'pending' | 'active' | 'failed';
  error: string | null;
  cert_pem: string | null;
  key_pem: string | null;
  expires_at: string | null;
  attempts: Generated<number>;
  next_attempt_at: string | null;
  updated_at: string;
}

/** The ACME account of one directory; `key_pem` is AES-256-GCM ciphertext. */
export interface AcmeAccountsTable {
  directory_url: string;
  key_pem: string;
  created_at: string;
}

/** A deployment's webhook: the shared secret, AES-256-GCM encrypted (it is read back to check HMACs). */
export interface WebhooksTable {
  deployment_id: string;
  secret: string;
  created_at: string;
}

/** One delivery a deployment's webhook received, and what came of it. */
export interface WebhookDeliveriesTable {
  seq: Generated<number>;
  id: string;
  deployment_id: string;
  received_at: string;
  provider: 'github' | 'gitea' | 'gitlab';
  event: string | null;
  delivery_id: string | null;
  /** The delivery id while it blocks a repeat (unique per deployment); null once that ends. */
  dedup_key: string | null;
  ref: string | null;
  commit_sha: string | null;
  outcome: 'deployed' | 'removed' | 'ignored' | 'rejected';
  build_id: string | null;
  reason: string;
}

/** A control-plane instance sharing the database (decisions §15); `last_seen_at` is its heartbeat. */
export interface InstancesTable {
  id: string;
  url: string | null;
  version: string;
  started_at: string;
  last_seen_at: string;
  leader: Generated<number>;
  builds_running: Generated<number>;
}

export interface TeamsTable {
  seq: Generated<number>;
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

export interface TeamMembersTable {
  team_id: string;
  user_id: string;
  role: 'viewer' | 'developer' | 'owner';
  created_at: string;
}

/** One recorded action (decisions §18): append-only, never a variable's value, a key or a password. */
export interface AuditLogTable {
  seq: Generated<number>;
  id: string;
  at: string;
  actor_id: string | null;
  actor_email: string | null;
  /** `session`, the API key's prefix, or `webhook`. */
  via: string;
  action: string;
  target_type: string;
  target_id: string | null;
  team_id: string | null;
  ip: string | null;
  outcome: 'success' | 'failure';
}

/** A user's quota overrides (decisions, issue 23); a null column is the installation's default. */
export interface UserQuotasTable {
  user_id: string;
  deployments: number | null;
  concurrent_builds: number | null;
  upload_bytes: number | null;
  api_keys: number | null;
  updated_at: string;
}

export interface Database {
  instance: InstanceTable;
  instances: InstancesTable;
  users: UsersTable;
  sessions: SessionsTable;
  api_keys: ApiKeysTable;
  deployments: DeploymentsTable;
  builds: BuildsTable;
  tunnels: TunnelsTable;
  subdomain_claims: SubdomainClaimsTable;
  env_vars: EnvVarsTable;
  build_configs: BuildConfigsTable;
  custom_domains: CustomDomainsTable;
  certificates: CertificatesTable;
  acme_accounts: AcmeAccountsTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  teams: TeamsTable;
  team_members: TeamMembersTable;
  audit_log: AuditLogTable;
  user_quotas: UserQuotasTable;
}
