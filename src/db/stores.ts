// The stores part: every store over the database (and the data directory), built once for the parts that use them.
import { sql } from 'kysely';
import type { Config } from '../config.js';
import type { BackgroundTask } from '../core/background.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import { BuildLogStore, type BuildLogs } from '../deploy/build-logs.js';
import type { Coordination } from '../deploy/coordination.js';
import { bootstrapAdmin } from '../domain/accounts.js';
import { useFastPasswordHashing } from '../domain/password-hashing.js';
import { KeyUsage } from '../domain/key-usage.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { SourceStore } from '../source/source-store.js';
import { databaseAccountStore } from './account-store.js';
import { databaseApiKeyStore } from './api-key-store.js';
import { DbAppConfigStore } from './app-config-store.js';
import { databaseAuditLog, pruneAudit } from './audit-log.js';
import { databaseBuildLogs } from './build-log-chunks.js';
import { databaseBuildQueue } from './build-queue.js';
import { DbCertificateStore } from './certificate-store.js';
import { databaseChallengeStore } from './challenge-store.js';
import { customDomainRoutes, databaseCustomDomainStore } from './custom-domain-store.js';
import type { Db } from './database.js';
import { databaseDeploymentCatalog } from './deployment-catalog.js';
import { databaseManagedDatabaseStore } from './managed-database-store.js';
import { databaseNotificationStore } from './notification-store.js';
import { databaseDeploymentStore } from './deployment-store.js';
import { databaseInstanceRegistry } from './instance-registry.js';
import { databasePreviewCatalog } from './preview-catalog.js';
import { databaseQuotaStore } from './quota-store.js';
import { databaseTeamStore } from './team-store.js';
import { databaseTunnelClaimStore } from './tunnel-claim-store.js';
import { databaseSharedUploads } from './upload-archives.js';
import { databaseWebhookStore } from './webhook-store.js';
import { databaseBackupStore } from './backup-store.js';
import { databasePitrStore } from './pitr-store.js';

export interface StoresDeps {
  readonly config: Config;
  readonly db: Db;
  readonly cipher: ValueCipher;
  readonly coordination: Coordination;
  /** This process's id among the instances sharing the database. */
  readonly runner: string;
  readonly log: Log;
}

export type Stores = Awaited<ReturnType<typeof buildStores>>;

/** How often audit entries older than SLIPWAY_AUDIT_RETENTION_DAYS are dropped (and once at start). */
const AUDIT_PRUNE_MS = 3_600_000;

/** The stores, the first admin (on a first start), and the API keys' coalesced use (flushed at stop). */
export async function storesPart(deps: StoresDeps): Promise<Part<Stores>> {
  const stores = await buildStores(deps);
  return { offers: stores, stop: () => stores.keyUsage.close() };
}

async function buildStores({ config, db, cipher, coordination, runner, log }: StoresDeps) {
  const shared = config.databaseUrl !== undefined;
  const sources = new SourceStore(config.dataDir);
  await sources.clearStaging();
  // On PostgreSQL build logs live in the database: read and followed from any instance (decisions §15).
  const diskLogs = new BuildLogStore(config.dataDir, config.buildLogMaxBytes);
  const buildLogs: BuildLogs = shared ? databaseBuildLogs(db, { maxBytes: config.buildLogMaxBytes, coordination, self: runner, fallback: diskLogs, log }) : diskLogs;
  const apiKeys = databaseApiKeyStore(db);
  const accounts = databaseAccountStore(db);
  useFastPasswordHashing(config.insecureFastPasswordHashing);
  if (config.insecureFastPasswordHashing) log('warn', 'SLIPWAY_INSECURE_FAST_PASSWORD_HASHING is set: new password hashes are weak (meant for test suites only)');
  const admin = await bootstrapAdmin(
    accounts,
    config.adminEmail !== undefined && config.adminPassword !== undefined ? { email: config.adminEmail, password: config.adminPassword } : undefined,
  );
  const auditPruning: BackgroundTask = {
    name: 'pruning the audit log',
    scope: 'everyInstance',
    everyMs: AUDIT_PRUNE_MS,
    immediately: true,
    run: async () => void (await pruneAudit(db, config.auditRetentionDays)),
  };
  return {
    sources,
    buildLogs,
    admin,
    apiKeys,
    accounts,
    keyUsage: new KeyUsage(apiKeys, { log: (msg, detail) => log('warn', msg, detail) }),
    registry: databaseInstanceRegistry(db, config.instanceLostMs),
    // On PostgreSQL uploads are kept in the database too: any instance can build one (decisions §15).
    sharedUploads: shared ? databaseSharedUploads(db) : undefined,
    // On PostgreSQL builds wait in one queue in the database; any instance with a free slot takes the next (decisions §15).
    buildQueue: shared ? await databaseBuildQueue(db, { self: runner, slots: config.maxConcurrentBuilds, coordination }) : undefined,
    configs: new DbAppConfigStore(db, cipher),
    deployments: databaseDeploymentStore(db, runner),
    catalog: databaseDeploymentCatalog(db),
    quotaStore: databaseQuotaStore(db),
    managedDatabases: databaseManagedDatabaseStore(db, cipher),
    backups: databaseBackupStore(db, cipher),
    pitr: databasePitrStore(db),
    webhooks: databaseWebhookStore(db, cipher),
    notificationStore: databaseNotificationStore(db, cipher),
    previews: databasePreviewCatalog(db),
    domains: databaseCustomDomainStore(db),
    customDomainRoutes: () => customDomainRoutes(db),
    audit: databaseAuditLog(db),
    teams: databaseTeamStore(db),
    tunnelClaims: databaseTunnelClaimStore(db),
    challenges: databaseChallengeStore(db),
    certificates: new DbCertificateStore(db, cipher),
    /** One round trip to the database (the health check). */
    ping: async (): Promise<void> => void (await sql`select 1`.execute(db)),
    auditPruning,
  };
}
