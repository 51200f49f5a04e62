// What the API needs, wired once in main.ts: the ports its routes use.
import type { Config } from '../config.js';
import type { DeploymentCatalog } from '../domain/deployment-catalog.js';
import type { BuildLogs } from '../deploy/build-logs.js';
import type { KeyUsage } from '../domain/key-usage.js';
import type { ApiKeyStore } from '../domain/api-keys.js';
import type { AccountStore } from '../domain/account-store.js';
import type { AuditLog } from '../domain/audit.js';
import type { TeamStore } from '../domain/teams.js';
import type { ListCursors } from './list-pages.js';
import type { SecretSeal } from '../domain/two-factor.js';
import type { FailureLimiter } from '../domain/rate-limiter.js';
import type { BranchTip, WebhookStore } from '../domain/webhook-store.js';
import type { PreviewCatalog } from '../domain/previews.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { DeploymentOperations } from '../domain/operations.js';
import type { InstanceRegistry } from '../domain/instances.js';
import type { SharedUploads } from '../domain/uploads.js';
import type { NodeDirectory } from '../domain/nodes.js';
import type { CustomDomainStore, DomainCertificates, HostRoutes } from '../domain/custom-domains.js';
import type { SourceStore } from '../source/source-store.js';
import type { QuotaGuard } from '../domain/quotas.js';
import type { ErrorLog } from './errors.js';
import type { HealthCheck } from './routes/health-routes.js';
import type { HealthReader } from '../domain/app-health.js';
import type { DatabasesContext } from '../databases/database-context.js';
import type { BackupsContext } from '../backups/backups-context.js';
import type { JobsContext } from '../jobs/jobs.js';
import type { ChannelsContext } from '../notifications/channels.js';

export interface TunnelListing {
  id: string;
  subdomain: string;
  url: string;
  api_key_id: string;
  connected_at: string;
  state: string;
  streams: number;
  user_id?: string;
  owner_email?: string;
}

/** What the API needs of the tunnel server. */
export interface TunnelDirectory {
  /** The user's tunnels; every user's (with `user_id`) when `userId` is undefined (held by any instance). */
  list(userId: string | undefined): TunnelListing[] | Promise<TunnelListing[]>;
  closeForKey(apiKeyId: string): void;
  /** Closes every tunnel of the user on every instance (the account was disabled). */
  closeForUser(userId: string): void;
}

/** Everything the API needs, wired once in main.ts. */
export interface ApiDeps {
  readonly config: Config;
  /** The clock two-factor codes are checked against (tests drive it; the system clock otherwise). */
  readonly now?: (() => number) | undefined;
  /** Deployments and builds as the API reads them; deployments' create and edit. */
  readonly deployments: DeploymentCatalog;
  readonly store: SourceStore;
  readonly buildLogs: BuildLogs;
  readonly loginLimiter: FailureLimiter;
  /** Teams and their members. */
  readonly teams: TeamStore;
  /** The audit log's reads (entries are appended by the stores). */
  readonly audit: AuditLog;
  /** Users and sessions, and the credential reads of authentication. */
  readonly accounts: AccountStore;
  /** API keys' records (create, list, revoke). */
  readonly apiKeys: ApiKeyStore;
  /** API key use (`last_used_at`), coalesced. */
  readonly keyUsage: KeyUsage;
  /** Seals and opens the cursors of paged lists. */
  readonly cursors: ListCursors;
  /** The installation key's cipher: seals two-factor secrets at rest. */
  readonly seal: SecretSeal;
  readonly operations: DeploymentOperations;
  /** Deployments' environment variables (encrypted at rest by the store). */
  readonly configs: AppConfigStore;
  /** Deployments' webhook secrets (encrypted at rest by the store) and the deliveries they received. */
  readonly webhooks: WebhookStore;
  /** Deployments' previews (decisions §17): deployment rows linked to their parent. */
  readonly previews: PreviewCatalog;
  /** Deliveries failing the signature check, per deployment's webhook (sliding window); signed ones never count. */
  readonly hookLimiter: FailureLimiter;
  /** Per-user quotas (deployments, builds in progress, stored upload bytes, API keys). */
  readonly quotas: QuotaGuard;
  /** The tip of a branch (or of the default branch) in a repository (git ls-remote), checked for every push. */
  readonly branchTip: BranchTip;
  readonly tunnels: TunnelDirectory;
  /** Deployments' custom domains. */
  readonly domains: CustomDomainStore;
  /** Where custom domains are routed (the routing table). */
  readonly hosts: HostRoutes;
  /** Custom domains' certificates (NO_CERTIFICATES while HTTPS is off). */
  readonly certificates: DomainCertificates;
  readonly health: HealthCheck;
  /** Whether live apps keep crashing (the deployments' `health`); all ok when absent. */
  readonly appHealth?: HealthReader | undefined;
  /** Uploads kept in the database for every instance (set with several instances on PostgreSQL). */
  readonly sharedUploads?: SharedUploads | undefined;
  /** The control-plane instances sharing the database (GET /api/v1/instances). */
  readonly instances: InstanceRegistry;
  /** The nodes apps run on (GET /api/v1/nodes, drain, activate). */
  readonly nodes: NodeDirectory;
  /** Seconds between two samples of the apps' metrics history (default 10). */
  readonly metricsIntervalSeconds?: number;
  /** The server's Prometheus text (GET /metrics). */
  readonly metrics: { render(): string | Promise<string> };
  /** Managed databases (decisions §19); absent: their routes are not served. */
  readonly databases?: DatabasesContext | undefined;
  /** Backups of managed databases (decisions §20); absent: their routes are not served. */
  readonly backups?: BackupsContext | undefined;
  /** Scheduled jobs (decisions §22); absent: their routes are not served. */
  readonly jobs?: JobsContext | undefined;
  /** Notification channels (decisions §23); absent: their routes are not served. */
  readonly notifications?: ChannelsContext | undefined;
  /** Where internal errors are logged with their detail; default: Fastify's logger (off unless enabled). */
  readonly log?: ErrorLog;
}
