// Database schema: the row types of every table, as Kysely sees them.
import type { Generated } from 'kysely';
import type { SessionRow, UserRow } from '../domain/account-store.js';
import type { ApiKeyRow } from '../domain/api-keys.js';
import type { CustomDomainRow } from '../domain/custom-domains.js';
import type { BuildRow, DeploymentRow } from '../domain/deployment-rows.js';
import type { DatabaseRow } from '../databases/database-store.js';
import type { JobRow, RunRow } from '../jobs/job-store.js';

/** A domain row as a table: the columns `K` have defaults (or are assigned) in the database. */
type Stored<Row, K extends keyof Row> = Omit<Row, K> & { [P in K]: Generated<Row[P]> };

/** A user as stored: its row (src/domain/account-store.ts) and the deployment-list version. */
export type UsersTable = Stored<
  UserRow & {
    /**
     * Changes whenever the user's deployment list may show something else (a deployment created,
     * deleted, or its row written): bumped by the deployment store and catalog in the same
     * transaction as the write, so a cached list page of an older version is never served.
     */
    deployments_version: number;
  },
  'deployments_version' | 'totp_enabled' | 'disabled'
>;

export type SessionsTable = SessionRow;

export type ApiKeysTable = ApiKeyRow;

/** A deployment as stored: its row (src/domain/deployment-rows.ts), with the columns the database fills in. */
export type DeploymentsTable = Stored<
  DeploymentRow,
  'volumes' | 'replicas' | 'auto_deploy' | 'previews' | 'parent_id' | 'pr_number' | 'pr_head_sha' | 'pr_head_repo' | 'pr_same_repo' | 'config_pending' | 'compose_path' | 'seq'
>;

/** A build as stored: its row, with the control-plane instance that runs (ran) it (null before instances were recorded). */
export type BuildsTable = Stored<BuildRow & { runner: string | null }, 'seq' | 'release_set'>;

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

export type CustomDomainsTable = CustomDomainRow;

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

/** An ACME HTTP-01 answer while its order is open (decisions §15: every instance answers it). */
export interface AcmeChallengesTable {
  token: string;
  key_authorization: string;
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
  databases: number | null;
  updated_at: string;
}

/** A managed database (decisions §19): its row, its owner key (names are unique per owner) and its encrypted credentials. */
export type ManagedDatabasesTable = Stored<Omit<DatabaseRow, 'seq' | 'size_bytes'> & { seq: number; size_bytes: number; owner_key: string; credentials: string }, 'seq' | 'size_bytes'>;

export interface DatabaseLinksTable {
  database_id: string;
  deployment_id: string;
  env: string;
  created_at: string;
}

/** An uploaded archive kept for every instance (several instances, decisions §15); its bytes are in `upload_chunks`. */
export interface UploadArchivesTable {
  upload_id: string;
  deployment_id: string;
  dockerfile: string | null;
  size: number;
}

export interface UploadChunksTable {
  upload_id: string;
  seq: number;
  data: Buffer;
}

/** A piece of a build's log (several instances, decisions §15), in `id` order; `final` (1) is written when the log is closed. */
export interface BuildLogChunksTable {
  id: Generated<number>;
  build_id: string;
  deployment_id: string;
  data: Buffer;
  final: number;
}

/** A build waiting for a slot, or holding one (`taken_by`), in the queue every instance shares (decisions §15). */
export interface BuildQueueTable {
  seq: Generated<number>;
  build_id: string;
  deployment_id: string;
  user_id: string;
  queued_by: string;
  lost_from: string | null;
  queued_at: Generated<Date>;
  taken_by: string | null;
  taken_at: string | null;
}

/** Each Slipway version that ran on the database, with the newest migration it carried (src/db/schema-version.ts). */
export interface SlipwayVersionsTable {
  version: string;
  schema: string;
  first_started_at: string;
}

/** A scheduled job (decisions §22); `command` is its argv as JSON. */
export type JobsTable = Omit<JobRow, 'command' | 'service'> & { command: string; service: string | null };

/** A job's run; `seq` orders them. */
export type JobRunsTable = RunRow & { seq: Generated<number> };

/** A piece of a run's log, in `id` order; `final` (1) closes it. */
export interface JobRunLogsTable {
  id: Generated<number>;
  run_id: string;
  data: Buffer;
  final: number;
}

/** The Dockerfile a build used: the source's own, or the one generated for it (decisions §24). */
export interface BuildDockerfilesTable {
  build_id: string;
  path: string;
  dockerfile: string;
  generated: number;
  /** JSON array of the detection's lines; null for the source's own Dockerfile. */
  detection: string | null;
}

/** A notification channel (decisions §23); `url` and `secret` are AES-256-GCM ciphertext. */
export interface NotificationChannelsTable {
  id: string;
  user_id: string;
  team_id: string | null;
  name: string;
  type: string;
  url: string | null;
  email: string | null;
  secret: string | null;
  events: string;
  created_at: string;
  updated_at: string;
}

/** An event in the notifications outbox: one row per event across instances (`dedupe_key` is unique). */
export interface NotificationEventsTable {
  id: string;
  dedupe_key: string;
  type: string;
  payload: string;
  at: string;
}

/** One message to one channel: retried in place (its id stays), claimed by the instance sending it. */
export interface NotificationDeliveriesTable {
  id: string;
  channel_id: string;
  event_id: string;
  event: string;
  at: string;
  outcome: string;
  attempts: Generated<number>;
  status_code: number | null;
  error: string | null;
  next_attempt_at: string;
  claimed_by: string | null;
  claimed_until: string | null;
}

/** A backup destination (decisions §20): settings as JSON, its secret AES-256-GCM encrypted. */
export interface BackupDestinationsTable {
  seq: Generated<number>;
  id: string;
  name: string;
  type: string;
  user_id: string;
  team_id: string | null;
  owner_key: string;
  settings: string;
  secret: string | null;
  created_at: string;
  updated_at: string;
}

/** A backup record (decisions §20); `source_counts` is JSON. */
export interface BackupsTable {
  seq: Generated<number>;
  id: string;
  database_id: string;
  database_name: string;
  engine: string;
  image: string;
  user_id: string;
  team_id: string | null;
  destination_id: string;
  status: string;
  trigger: string;
  size_bytes: number | null;
  sha256: string | null;
  location: string;
  source_counts: string | null;
  runner: string | null;
  due_at: string | null;
  started_at: string;
  finished_at: string | null;
  verified_at: string | null;
  error: string | null;
}

export interface BackupRestoresTable {
  id: string;
  database_id: string;
  backup_id: string;
  target_database_id: string;
  safety_backup_id: string | null;
  status: string;
  error: string | null;
  started_at: string;
  finished_at: string | null;
}

export interface BackupSchedulesTable {
  database_id: string;
  schedule: string;
  destination_id: string;
  keep: number;
  pitr: number;
  updated_at: string;
}

/** A base backup of a database with point-in-time recovery (decisions §20). */
export interface PitrBaseBackupsTable {
  id: string;
  database_id: string;
  destination_id: string;
  location: string;
  start_wal: string;
  status: string;
  size_bytes: number | null;
  sha256: string | null;
  runner: string | null;
  error: string | null;
  started_at: string;
  finished_at: string | null;
}

/** A write-ahead log file archived to a destination. */
export interface PitrWalFilesTable {
  database_id: string;
  name: string;
  destination_id: string;
  location: string;
  closed_at: string;
  size_bytes: number;
  sha256: string;
  uploaded_at: string;
}

export interface PitrStateTable {
  database_id: string;
  archived_until: string | null;
  error: string | null;
  updated_at: string;
}

export interface Database {
  build_dockerfiles: BuildDockerfilesTable;
  build_queue: BuildQueueTable;
  build_log_chunks: BuildLogChunksTable;
  instance: InstanceTable;
  instances: InstancesTable;
  upload_archives: UploadArchivesTable;
  upload_chunks: UploadChunksTable;
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
  acme_challenges: AcmeChallengesTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  teams: TeamsTable;
  team_members: TeamMembersTable;
  audit_log: AuditLogTable;
  user_quotas: UserQuotasTable;
  managed_databases: ManagedDatabasesTable;
  database_links: DatabaseLinksTable;
  slipway_versions: SlipwayVersionsTable;
  jobs: JobsTable;
  job_runs: JobRunsTable;
  job_run_logs: JobRunLogsTable;
  notification_channels: NotificationChannelsTable;
  notification_events: NotificationEventsTable;
  notification_deliveries: NotificationDeliveriesTable;
  backup_destinations: BackupDestinationsTable;
  backups: BackupsTable;
  backup_schedules: BackupSchedulesTable;
  backup_restores: BackupRestoresTable;
  pitr_base_backups: PitrBaseBackupsTable;
  pitr_wal_files: PitrWalFilesTable;
  pitr_state: PitrStateTable;
}
