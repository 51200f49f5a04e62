// Composition root: wires configuration, database, engine, data plane, tunnels and API; listens.
import { databaseAuditLog, startAuditPruning } from './db/audit-log.js';
import http from 'node:http';
import https from 'node:https';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import path from 'node:path';
import { buildApp } from './api/app.js';
import { ApiTurns } from './api/api-turns.js';
import { answerUnmetExpectation, endSocketWithError, writeInternalError } from './api/socket-errors.js';
import { BuildLogStore, type BuildLogs } from './deploy/build-logs.js';
import { databaseBuildLogs } from './db/build-log-chunks.js';
import { databaseBuildQueue, type DatabaseBuildQueue } from './db/build-queue.js';
import { DeploymentLifecycle } from './deploy/lifecycle.js';
import { startMetricsSampler } from './deploy/metrics-sampler.js';
import { MetricsHistory } from './domain/metrics-history.js';
import { planRecovery } from './deploy/reconcile.js';
import { drainingNodes } from './deploy/node-drain.js';
import { releaseTotals } from './runtime/app-runtime.js';
import { appUrl, ConfigError, type Config } from './config.js';
import { instanceId as loadInstanceId, openDatabase } from './db/database.js';
import { databaseDeploymentStore } from './db/deployment-store.js';
import { databaseDeploymentCatalog } from './db/deployment-catalog.js';
import { customDomainRoutes, databaseCustomDomainStore } from './db/custom-domain-store.js';
import { runnerId } from './runner-id.js';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';
import type { Coordination } from './deploy/coordination.js';
import { memoryCoordination } from './deploy/memory-coordination.js';
import { pgCoordination } from './db/pg-coordination.js';
import { announcingDataPlane, syncRoutes } from './deploy/route-sync.js';
import { databaseInstanceRegistry } from './db/instance-registry.js';
import { databaseSharedUploads } from './db/upload-archives.js';
import { restoreUpload } from './domain/uploads.js';
import { VERSION } from './version.js';
import { DbAppConfigStore, readKeyCheck, writeKeyCheck } from './db/app-config-store.js';
import { databaseWebhookStore } from './db/webhook-store.js';
import { branchTip } from './source/git.js';
import type { BuildSlots } from './deploy/fair-build-slots.js';
import { databasePreviewCatalog } from './db/preview-catalog.js';
import { QuotaGuard } from './domain/quotas.js';
import { databaseQuotaStore } from './db/quota-store.js';
import { unlockInstallation } from './secrets/unlock.js';
import { securePrivateDataDir } from './secrets/private-data-dir.js';
import { releaseNetworksOnStop } from './deploy/host-cleanup.js';
import { authenticateBearer, bootstrapAdmin } from './domain/accounts.js';
import { KeyUsage } from './domain/key-usage.js';
import { NO_CERTIFICATES } from './domain/custom-domains.js';
import { DbCertificateStore } from './db/certificate-store.js';
import type { CertificateManager } from './tls/certificate-manager.js';
import { HttpChallenges } from './tls/http-challenges.js';
import { startEdgeCertificates } from './tls/edge-certificates.js';
import { databaseChallengeStore } from './db/challenge-store.js';
import { hostOf, redirectToHttps } from './tls/https-redirect.js';
import { connectedTunnel, frontDoor } from './proxy/front-door.js';
import { ListCursors } from './api/list-pages.js';
import { sharedFailureLimiter } from './deploy/shared-limiter.js';
import { authenticateTunnelKey, claimTunnelSubdomain, releaseTunnelsOf, releaseTunnelSubdomain } from './domain/tunnel-claims.js';
import { databaseTunnelClaimStore } from './db/tunnel-claim-store.js';
import { databaseApiKeyStore } from './db/api-key-store.js';
import { databaseAccountStore } from './db/account-store.js';
import { databaseTeamStore } from './db/team-store.js';
import { AppProxy } from './proxy/app-proxy.js';
import { createServerMetrics } from './api/server-metrics.js';
import { nodeDataPlane } from './proxy/node-data-plane.js';
import { healthCheckedPlane } from './proxy/replica-health.js';
import { boundRequests, boundedServerOptions } from './proxy/request-bounds.js';
import { requestHeadProblem } from './proxy/request-guard.js';
import { edgeRefusals } from './proxy/edge-refusals.js';
import { RoutingTable, type Upstream } from './proxy/routing-table.js';
import { findHaproxy, freePort } from './proxy/haproxy/haproxy-binary.js';
import { HaproxyDataPlane, haproxyFiles, listenForHaproxy } from './proxy/haproxy/haproxy-data-plane.js';
import { proxyProtocolListener } from './proxy/proxy-protocol.js';
import { createDockerEngine } from './runtime/docker/docker-engine.js';
import { selectRuntime } from './runtime/select-runtime.js';
import type { ContainerEngine } from './runtime/engine.js';
import { SourceStore } from './source/source-store.js';
import { TunnelServer } from './tunnel/tunnel-server.js';
import { INSTANCE_CALL_KEY_INFO } from './tunnel/instance-calls.js';
import { InstanceTunnels } from './tunnel/instance-tunnels.js';
import { sql } from 'kysely';
import { Registry } from 'prom-client';

export interface RunningServer {
  /** Base URL of the API, e.g. http://127.0.0.1:8080 */
  readonly url: string;
  readonly port: number;
  /** The TLS port when HTTPS is on (SLIPWAY_HTTPS_PORT). */
  readonly httpsPort: number | undefined;
  /** Set on a first start without SLIPWAY_ADMIN_*: the generated admin password (print it once). */
  readonly generatedAdmin: { email: string; password: string } | undefined;
  /** This installation's id (the `dev.slipway.instance` label on its containers). */
  readonly instanceId: string;
  /** Who serves the public port: HAProxy (with Node on an internal Unix socket behind it) or Node itself. */
  readonly dataPlane: 'haproxy' | 'node';
  /** The supervised HAProxy's pid now (undefined on the Node plane, or while HAProxy is down). */
  haproxyPid(): number | undefined;
  close(): Promise<void>;
}

type Log = (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;

export interface StartOptions {
  /** Engine to use instead of the one DOCKER_HOST names (tests). */
  engine?: ContainerEngine;
  log?: Log;
  /** Environment base for git children (PATH, HOME). */
  gitEnv?: Record<string, string>;
  /** Where builds wait for a slot instead of the fair scheduler (bench/fair-builds compares policies). */
  buildSlots?: BuildSlots;
}

/** How often an instance records itself in the registry (it is `lost` after 30 s of silence). */
const HEARTBEAT_MS = 5_000;
/** How often every route is read again from the database (several instances: repairs a missed notification). */
const ROUTE_RESYNC_MS = 10_000;

/** Starts Slipway: the data directory's lock, migrations, admin bootstrap, reconciliation, then the HTTP listener. */
export async function startServer(startConfig: Config, options: StartOptions = {}): Promise<RunningServer> {
  const runner = await runnerId(startConfig.dataDir);
  // One process per data directory (on SQLite, the one instance): a second is refused, naming the holder.
  const dirLock = await lockDataDir(startConfig.dataDir, runner);
  try {
    return await startLocked(startConfig, options, runner, dirLock);
  } catch (err) {
    dirLock.release();
    throw err;
  }
}

async function startLocked(startConfig: Config, options: StartOptions, runner: string, dirLock: DataDirLock): Promise<RunningServer> {
  // A private copy: with SLIPWAY_PORT=0 the app URLs take the port the listener actually gets.
  const config: Config = { ...startConfig, publicUrl: new URL(startConfig.publicUrl.href) };
  const log: Log = options.log ?? ((level, msg, detail) => {
    if (config.logLevel === 'silent') return;
    const line = detail === undefined ? msg : `${msg} ${safeJson(detail)}`;
    process.stderr.write(`[slipway] ${level}: ${line}\n`);
  });
  await securePrivateDataDir(config.dataDir);
  const db = await openDatabase({ file: path.join(config.dataDir, 'slipway.db'), url: config.databaseUrl });
  const engine =
    options.engine ??
    createDockerEngine(config.dockerHost, {
      // Apps call each other and the API by their public URLs: the edge's ports stay open to them.
      appHostPorts: [config.port, config.https?.port ?? 0],
      warn: (message) => log('warn', message),
    });
  let haproxyBinary: string | undefined;
  if (config.dataPlane !== 'node') {
    const found = await findHaproxy(config.haproxyBinary);
    if ('path' in found) haproxyBinary = found.path;
    else if (config.dataPlane === 'haproxy') {
      await db.destroy();
      throw new ConfigError(`SLIPWAY_DATA_PLANE=haproxy but ${found.missing} (install Debian's haproxy, or set SLIPWAY_DATA_PLANE=node)`);
    } else log('info', `HAProxy not available (${found.missing}): the Node data plane serves the public port`);
  }
  const instanceId = await loadInstanceId(db);
  let unlocked;
  let coordination: Coordination;
  try {
    unlocked = await unlockInstallation(config.secretKey, config.dataDir, { read: () => readKeyCheck(db), write: (check) => writeKeyCheck(db, check) });
    // Several instances share PostgreSQL: locks, leadership and route changes go through it (decisions §15).
    coordination = config.databaseUrl === undefined ? memoryCoordination() : await pgCoordination({ url: config.databaseUrl, log });
  } catch (err) {
    await db.destroy();
    throw err;
  }
  const installationCipher = unlocked.cipher;
  const registry = databaseInstanceRegistry(db);
  // On PostgreSQL uploads are kept in the database too: any instance can build one (decisions §15).
  const sharedUploads = config.databaseUrl === undefined ? undefined : databaseSharedUploads(db);
  const archiveLimits = { maxExpandedBytes: config.maxExpandedBytes, maxEntries: config.maxArchiveEntries };
  const startedAt = new Date().toISOString();
  const configs = new DbAppConfigStore(db, installationCipher);
  const sources = new SourceStore(config.dataDir);
  await sources.clearStaging();
  const deployments = databaseDeploymentStore(db, runner);
  // On PostgreSQL build logs live in the database: read and followed from any instance (decisions §15).
  const diskLogs = new BuildLogStore(config.dataDir, config.buildLogMaxBytes);
  const buildLogs: BuildLogs =
    config.databaseUrl === undefined
      ? diskLogs
      : databaseBuildLogs(db, { maxBytes: config.buildLogMaxBytes, coordination, self: runner, fallback: diskLogs, log });
  const table = new RoutingTable(config.domain);
  const urlFor = (subdomain: string): string => appUrl(config, subdomain);
  const apiKeys = databaseApiKeyStore(db);
  const keyUsage = new KeyUsage(apiKeys, { log: (msg, detail) => log('warn', msg, detail) });

  const accounts = databaseAccountStore(db);
  const admin = await bootstrapAdmin(
    accounts,
    config.adminEmail !== undefined && config.adminPassword !== undefined ? { email: config.adminEmail, password: config.adminPassword } : undefined,
  );

  const engineUp = await engine.ping(AbortSignal.timeout(5000)).then(
    () => true,
    (err: unknown) => {
      log('warn', `the Docker engine does not answer (${err instanceof Error ? err.message : String(err)}); deploys will fail until it does`);
      return false;
    },
  );
  // Read at scrape time: the tunnel server and listener are created below.
  let liveTunnels = (): number => 0;
  let listening = false;
  // With HAProxy in front, the routing table stays the one the control plane writes (through the
  // port); HAProxy mirrors it. A request to an old upstream may be in either plane, so both drain.
  let haproxy: HaproxyDataPlane | undefined;
  const metrics = createServerMetrics(new Registry(), {
    liveTunnels: () => liveTunnels(),
    dataPlane: () => (haproxy === undefined ? { plane: 'node', up: listening } : { plane: 'haproxy', up: haproxy.pid !== undefined }),
    // Live app traffic bypasses the Node proxy under HAProxy: its counters are read at each scrape.
    ...(haproxyBinary === undefined ? {} : { haproxyServers: async () => (haproxy === undefined ? [] : haproxy.appStats(AbortSignal.timeout(2000))) }),
  });
  const proxy = new AppProxy({
    table,
    publicProtocol: config.publicUrl.protocol.replace(':', ''),
    log,
    onRequestEnd: (app, status, seconds) => metrics.requestEnded(app, status, seconds),
  });
  // A replica that stops answering (its node lost) leaves the routes within seconds (decisions §16).
  const localPlane = healthCheckedPlane(nodeDataPlane(table, {
    drain: async (upstream: Upstream, timeoutMs: number): Promise<void> => {
      await Promise.all([proxy.drain(upstream, timeoutMs), haproxy?.drain(upstream, timeoutMs)]);
    },
  }), { log });
  // Serve first (docs/decisions.md, "Recovery that serves first"): routes come from one look at the
  // engine; releases whose containers stopped answer 503 `starting` and are started again behind the listener.
  // Start-up routes are this instance's own (the others have theirs): the local plane, not announced.
  // SLIPWAY_RUNTIME (decisions §16): one engine's containers, or services on the swarm that engine manages.
  const selected = await selectRuntime(config, engine, instanceId, log).catch(async (err: unknown) => {
    await Promise.allSettled([keyUsage.close(), coordination.close(), db.destroy()]);
    throw err;
  });
  const { runtime, nodes: nodeDirectory, swarm: swarmRuntime, ownRegistry } = selected;
  const planned = await planRecovery({ store: deployments, engine, runtime, dataPlane: localPlane, dataDir: config.dataDir, instanceId, log }, engineUp);
  // Strays are removed only by a leader alone: with other instances live, a container not yet
  // recorded may be another instance's build in flight.
  const othersLive = config.databaseUrl === undefined ? false : [...(await registry.liveUrls(new Date())).keys()].some((id) => id !== runner);
  const recovery = coordination.isLeader() && !othersLive ? planned : { ...planned, sweep: undefined };
  // Every route change is announced to the other instances (ids only); they read the route from the database.
  const dataPlane = announcingDataPlane(localPlane, coordination, runner);
  const tunnelClaims = databaseTunnelClaimStore(db);
  await releaseTunnelsOf(tunnelClaims, runner); // no tunnel survives a restart; clients reconnect

  // Custom domains follow their deployment's route (the table resolves them to its subdomain).
  for (const d of await customDomainRoutes(db)) dataPlane.publishHost(d.hostname, { subdomain: d.subdomain, deploymentId: d.deploymentId });

  // On PostgreSQL builds wait in one queue in the database; any instance with a free slot takes the next (decisions §15).
  const sharedQueue: DatabaseBuildQueue | undefined =
    config.databaseUrl === undefined ? undefined : await databaseBuildQueue(db, { self: runner, slots: config.maxConcurrentBuilds, coordination });
  const lifecycleGitEnv = options.gitEnv ?? { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: config.dataDir };
  const quotas = new QuotaGuard(databaseQuotaStore(db), config.quotas);
  // An hour of samples whatever the interval.
  const metricsHistory = new MetricsHistory({ capacity: Math.ceil(3_600_000 / config.metricsIntervalMs) });
  const lifecycle = new DeploymentLifecycle({
    quotas,
    metricsHistory,
    store: deployments,
    configs,
    engine,
    runtime,
    dataPlane,
    sources,
    buildLogs,
    log,
    onBuildEnd: (outcome, seconds) => metrics.buildEnded(outcome, seconds),
    ...(options.buildSlots === undefined ? {} : { buildSlots: options.buildSlots }),
    ...(sharedQueue === undefined ? {} : { buildQueue: sharedQueue }),
    coordination,
    ...(sharedUploads === undefined
      ? {}
      : { restoreUpload: (deploymentId: string, uploadId: string, dockerfilePath: string, signal: AbortSignal) => restoreUpload({ store: sources, shared: sharedUploads, archiveLimits }, deploymentId, uploadId, dockerfilePath, signal) }),
    settings: {
      instanceId,
      dataDir: config.dataDir,
      allowPrivateGit: config.allowPrivateGit,
      buildTimeoutMs: config.buildTimeoutMs,
      startupTimeoutMs: config.startupTimeoutMs,
      keepImages: config.keepImages,
      defaultMemoryBytes: config.defaultMemoryBytes,
      defaultNanoCpus: config.defaultNanoCpus,
      appPidsLimit: config.appPidsLimit,
      build: {
        network: config.buildNetwork,
        memoryBytes: config.buildMemoryBytes,
        nanoCpus: config.buildNanoCpus,
        pidsLimit: config.buildPidsLimit,
      },
      maxConcurrentBuilds: config.maxConcurrentBuilds,
      recoveryConcurrency: config.recoveryConcurrency,
      gitEnv: lifecycleGitEnv,
    },
  });
  // Under swarm replicas move between nodes on their own: the edge follows them within a few seconds.
  const stopWatching = lifecycle.watchLiveContainers(config.runtime === 'swarm' ? 2_000 : 5_000, () => coordination.isLeader());
  const stopSampling = startMetricsSampler({
    history: metricsHistory,
    liveContainers: () => deployments.liveContainers(),
    // A release's figures summed over its replicas (one engine's containers, or a swarm service's tasks).
    containerStats: async (id, signal) => releaseTotals(await runtime.releaseStats(id, signal)),
    log: (level, message, fields) => log(level, message, fields),
  }, config.metricsIntervalMs);
  // The registry: this instance's heartbeat (GET /api/v1/instances); the leader drops instances gone for a day.
  let beats = 0;
  const heartbeat = async (): Promise<void> => {
    const leader = coordination.isLeader();
    await registry.heartbeat({ id: runner, url: config.instanceUrl ?? null, version: VERSION, startedAt, leader, buildsRunning: lifecycle.buildsRunning });
    if (leader && beats++ % 720 === 0) await registry.prune(new Date());
  };
  await heartbeat();
  // The leader takes over builds of instances gone silent (lost after 30 s): built again from the start here.
  const takeOverBuilds = async (): Promise<void> => {
    if (config.databaseUrl === undefined || !coordination.isLeader()) return;
    const live = await registry.liveIds(new Date());
    // Slots held by lost instances are free again; their builds are queued again below.
    await sharedQueue?.forgetLost(live);
    const orphans = await deployments.orphanedBuilds(live);
    for (const orphan of orphans) await lifecycle.takeOver(orphan.deploymentId, orphan.buildId, orphan.runner);
  };
  const heartbeatTimer = setInterval(() => {
    void heartbeat().catch((err: unknown) => log('warn', 'the instance heartbeat failed', { error: err }));
    void takeOverBuilds().catch((err: unknown) => log('warn', 'taking over the builds of a lost instance failed', { error: err }));
  }, HEARTBEAT_MS);
  heartbeatTimer.unref();
  // A change of leader shows in the registry at once, not at the next beat.
  const stopLeadershipBeat = coordination.onLeadership(() => {
    void heartbeat().catch((err: unknown) => log('warn', 'the instance heartbeat failed', { error: err }));
  });
  const stopRouteSync =
    config.databaseUrl === undefined
      ? () => undefined
      : syncRoutes({
          coordination,
          store: deployments,
          dataPlane: localPlane,
          appRoutes: () => localPlane.routes(),
          publishedHosts: () => table.hosts(),
          storedHosts: () => customDomainRoutes(db),
          isLocal: (deploymentId) => lifecycle.isRecovering(deploymentId),
          localChanges: dataPlane,
          self: runner,
          resyncMs: ROUTE_RESYNC_MS,
          log,
        });
  // Tunnels across instances (decisions §15): visitors on any instance reach the one holding the tunnel (signed calls).
  const acrossInstances = new InstanceTunnels({
    callKey: installationCipher.deriveKey(INSTANCE_CALL_KEY_INFO),
    self: runner,
    shared: config.databaseUrl !== undefined,
    instanceUrl: config.instanceUrl,
    coordination,
    claims: tunnelClaims,
    registry,
    table,
    dataPlane: localPlane,
    protocol: config.publicUrl.protocol.replace(':', ''),
    resyncMs: ROUTE_RESYNC_MS,
    checkMs: HEARTBEAT_MS,
    log,
  });
  const tunnels = new TunnelServer({
    dataPlane,
    authority: {
      authenticateKey: (key) => authenticateTunnelKey((bearer) => authenticateBearer(accounts, keyUsage, bearer), key),
      claimSubdomain: async (subdomain, owner, tunnelId) => {
        const result = await claimTunnelSubdomain(tunnelClaims, runner, subdomain, owner, tunnelId);
        if (result === 'ok') acrossInstances.changed(subdomain);
        return result;
      },
      releaseSubdomain: async (subdomain, tunnelId) => {
        await releaseTunnelSubdomain(tunnelClaims, subdomain, tunnelId);
        acrossInstances.changed(subdomain);
      },
    },
    publicUrlFor: urlFor,
    limits: { tunnelsPerKey: config.tunnelsPerKey, streamsPerTunnel: config.streamsPerTunnel },
    idleTimeoutMs: config.edge.keepAliveTimeoutMs,
    log,
  });
  liveTunnels = () => tunnels.connectedCount();
  acrossInstances.start(tunnels);

  // HTTPS (decisions §8): certificates for the hosts Slipway serves, answered by SNI on the TLS port.
  // Challenge answers live in the database: the CA may reach any instance (decisions §15).
  const challenges = new HttpChallenges(databaseChallengeStore(db), log);
  // acme-client is loaded only when HTTPS is on: it is a large part of the start-up's module loading.
  const edgeCertificates =
    config.https === undefined
      ? undefined
      : startEdgeCertificates({
          config,
          https: config.https,
          createIssuer: (await import('./tls/acme-issuer.js')).createAcmeIssuer,
          repository: new DbCertificateStore(db, installationCipher),
          challenges,
          table,
          coordination,
          self: runner,
          shared: config.databaseUrl !== undefined,
          resyncMs: ROUTE_RESYNC_MS,
          log,
        });
  const certificates = edgeCertificates?.certificates;

  const app = await buildApp({
    metrics,
    config,
    log,
    deployments: databaseDeploymentCatalog(db),
    store: sources,
    buildLogs,
    // 10 failures per account; an address gets more room, since many users may share it (NAT).
    keyUsage,
    // Cursors are sealed with the installation key: they survive restarts, not a key rotation.
    cursors: new ListCursors(unlocked.cipher),
    seal: unlocked.cipher,
    // Counted across every instance (decisions §15): each change is announced on the coordination feed.
    loginLimiter: sharedFailureLimiter('login', { maxFailures: 10, maxFailuresByKind: { ip: 100 }, windowMs: 15 * 60_000 }, coordination, runner),
    operations: lifecycle,
    metricsIntervalSeconds: config.metricsIntervalMs / 1000,
    configs,
    webhooks: databaseWebhookStore(db, unlocked.cipher),
    quotas,
    // 60 badly signed deliveries a minute per webhook, then 429; correctly signed ones are never limited (§10).
    previews: databasePreviewCatalog(db),
    hookLimiter: sharedFailureLimiter('hook', { maxFailures: 60, windowMs: 60_000 }, coordination, runner),
    branchTip: (repoUrl, branch) =>
      branchTip(repoUrl, branch, { allowPrivate: config.allowPrivateGit, timeoutMs: 60_000, signal: AbortSignal.timeout(60_000), gitEnv: lifecycleGitEnv }),
    tunnels: {
      list: async (userId) => {
        const here = tunnels.list(userId).map((t) => ({
          id: t.id,
          subdomain: t.subdomain,
          url: t.url,
          api_key_id: t.apiKeyId,
          connected_at: t.connectedAt,
          state: t.state,
          streams: t.streams,
          ...(userId === undefined ? { user_id: t.userId } : {}),
        }));
        // Tunnels held by other instances (decisions §15): their streams are counted there, not here.
        const elsewhere = (await acrossInstances.elsewhere(userId, new Set(here.map((t) => t.id)))).map((t) => ({
          id: t.id,
          subdomain: t.subdomain,
          url: urlFor(t.subdomain),
          api_key_id: t.apiKeyId,
          connected_at: t.connectedAt,
          state: t.state,
          streams: 0,
          ...(userId === undefined ? { user_id: t.userId } : {}),
        }));
        return [...here, ...elsewhere];
      },
      closeForKey: (apiKeyId) => {
        tunnels.closeForKey(apiKeyId);
        acrossInstances.keyDeleted(apiKeyId);
      },
      closeForUser: (userId) => {
        tunnels.closeForUser(userId);
        acrossInstances.userDisabled(userId);
      },
    },
    domains: databaseCustomDomainStore(db),
    apiKeys,
    accounts,
    audit: databaseAuditLog(db),
    teams: databaseTeamStore(db),
    hosts: {
      addHost: (hostname, deployment) => dataPlane.publishHost(hostname, { subdomain: deployment.subdomain, deploymentId: deployment.id }),
      removeHost: (hostname) => dataPlane.withdrawHost(hostname),
    },
    certificates: certificates ?? NO_CERTIFICATES,
    instances: registry,
    sharedUploads,
    // Under swarm a drain first takes the node's replicas out of the edge and lets their requests end.
    nodes:
      swarmRuntime === undefined
        ? nodeDirectory
        : drainingNodes(nodeDirectory, {
            runtime: swarmRuntime,
            liveSubdomains: async () => (await deployments.liveContainers()).map((row) => row.subdomain),
            refreshRoutes: () => lifecycle.refreshLiveRoutes(),
            dataPlane,
            drainMs: 10_000,
          }),
    health: async () => {
      const checks: Record<string, { ok: boolean; detail?: string }> = {};
      try {
        await sql`select 1`.execute(db);
        const problem = coordination.problem();
        checks['database'] = problem === undefined ? { ok: true } : { ok: false, detail: problem };
      } catch (err) {
        checks['database'] = { ok: false, detail: err instanceof Error ? err.message : 'unreachable' };
      }
      try {
        const version = await engine.ping(AbortSignal.timeout(3000));
        checks['docker'] = { ok: true, detail: `engine ${version.version}` };
      } catch {
        checks['docker'] = { ok: false, detail: 'the Docker engine does not answer' };
      }
      // Recovery never makes the server unhealthy: it serves meanwhile (apps answer 503 `starting`).
      const recovering = lifecycle.recoveringCount;
      checks['recovery'] = { ok: true, detail: recovering === 0 ? 'done' : `recovering: ${recovering} app(s) starting again` };
      return { ok: Object.values(checks).every((c) => c.ok), checks };
    },
  });
  // A change the API made to the routing table (deploy, stop, domains…) is answered only once the
  // HAProxy plane has applied it, so the caller's next request through the edge already sees it.
  app.addHook('onSend', async (request, _reply, payload) => {
    if (haproxy !== undefined && request.method !== 'GET' && request.method !== 'HEAD') await haproxy.settled(2000);
    return payload;
  });
  await app.ready();

  // API requests start one per event-loop turn: app traffic and tunnels never wait behind a burst of them.
  const apiTurns = new ApiTurns((err) => log('error', 'API request handler threw', { error: err }));
  // What is not yet a request (malformed, ambiguous, late) is refused as JSON for the API, with a page on app hosts.
  const refusals = edgeRefusals((host) => table.resolveHost(host) !== null);
  // One handler for both ports: app hosts go to the data plane, everything else to the API.
  const handleRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    try {
      const problem = requestHeadProblem(req);
      if (problem !== undefined) return refusals.badRequest(req, res, problem);
      // Another instance forwarding a visitor of a tunnel held here: verified, or 401.
      if (acrossInstances.handleRequest(req, res)) return;
      if (!proxy.handleRequest(req, res)) {
        apiTurns.run(() => {
          try {
            app.routing(req, res);
          } catch (err) {
            if (res.headersSent) res.destroy();
            else writeInternalError(res);
            throw err;
          }
        });
      }
    } catch (err) {
      // The last line of defence: a throw here would otherwise end the process for every tenant.
      log('error', 'request handler threw', { url: req.url, error: err });
      if (res.headersSent) res.destroy();
      else writeInternalError(res);
    }
  };
  const handleUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Node takes its own error listener off an upgraded socket: without one, a client that resets
    // while it is being answered (a 404 page, a refusal) is an uncaught exception that ends the process.
    socket.on('error', () => socket.destroy());
    try {
      const problem = requestHeadProblem(req);
      if (problem !== undefined) return refusals.rawBadRequest(req, socket, problem);
      if (acrossInstances.handleUpgrade(req, socket, head)) return;
      if (proxy.handleUpgrade(req, socket, head)) return;
      if ((req.url ?? '').split('?')[0] === '/api/v1/tunnels/connect') {
        tunnels.handleUpgrade(req, socket, head);
        return;
      }
      endSocketWithError(socket, 404, { error: 'not_found', message: 'no WebSocket endpoint at this path' });
    } catch (err) {
      log('error', 'upgrade handler threw', { url: req.url, error: err });
      socket.destroy();
    }
  };
  let httpsPort = config.https?.port ?? 0;
  // The plain port: with HTTPS on, ACME challenges first, then 308 for every host that has a certificate.
  const server = http.createServer(boundedServerOptions(config.edge), (req, res) => {
    if (certificates !== undefined) {
      try {
        if (requestHeadProblem(req) === undefined && (challenges.handle(req, res) || redirectToHttps(req, res, httpsPort, (host) => certificates.hasCertificate(host)))) return;
      } catch (err) {
        log('error', 'HTTPS redirect threw', { url: req.url, error: err });
      }
    }
    handleRequest(req, res);
  });
  /**
   * Every server of the edge: upgrades (WebSockets, tunnels; never redirected: their clients do not
   * follow redirects) to the one handler; requests Node's parser refuses get the same {error,
   * message} JSON as every other error; uploads and requests to apps (streamed to the app) get the
   * long bound, API JSON the short one.
   */
  const edgeServer = (s: http.Server): ReturnType<typeof boundRequests> => {
    s.on('upgrade', handleUpgrade);
    s.on('clientError', refusals.clientError);
    s.on('checkExpectation', answerUnmetExpectation);
    return boundRequests(s, config.edge, (req) => table.resolveHost(req.headers.host) !== null || /^multipart\//i.test(req.headers['content-type'] ?? ''));
  };
  const connections = edgeServer(server);
  /**
   * Every connection to Node's plain listeners passes the front door: one whose first request names
   * a connected tunnel becomes a raw pipe through it (a plain request to a host with a certificate
   * excepted: its 308 comes from the HTTP server); any other goes to `target` HTTP server.
   */
  const withFrontDoor = (target: http.Server, encrypted: boolean): ((socket: Socket) => void) => {
    const door = frontDoor({
      http: target,
      headTimeoutMs: config.edge.headersTimeoutMs,
      answerLateHead: refusals.lateHead,
      target: (host) => {
        if (!encrypted && certificates !== undefined && certificates.hasCertificate(hostOf(host) ?? '')) return undefined;
        return connectedTunnel(table, host, (app) => ({
          onRequestEnd: (status, seconds) => metrics.requestEnded(app, status, seconds),
          release: (idle) => target.emit('connection', idle),
        }));
      },
    });
    // Counted against its address as it arrives, before its first head (whoever serves it after).
    return (socket) => {
      if (!connections.admit(socket)) return;
      if (encrypted) Object.defineProperty(socket, 'encrypted', { value: true });
      door(socket);
    };
  };
  // Audit entries older than SLIPWAY_AUDIT_RETENTION_DAYS are dropped at start and every hour.
  const stopAuditPruning = startAuditPruning(db, config.auditRetentionDays, log);
  /** The last steps of every shutdown (a refused start too): data plane, lifecycle, API, database. */
  const closeControlPlane = async (): Promise<void> => {
    stopAuditPruning();
    proxy.close();
    localPlane.close();
    stopWatching();
    stopSampling();
    clearInterval(heartbeatTimer);
    stopLeadershipBeat();
    stopRouteSync();
    acrossInstances.close();
    edgeCertificates?.stop();
    await lifecycle.close();
    // A clean stop leaves no network (nor its firewall chains) that nothing uses.
    await releaseNetworksOnStop(engine, instanceId, log);
    await app.close();
    await keyUsage.close();
    await coordination.close();
    await selected.guard?.stop();
    await ownRegistry?.stop();
    await db.destroy();
    dirLock.release();
  };
  let port: number;
  let internal: TcpServer | undefined;
  let tlsHandoff: { server: http.Server; listener: TcpServer } | undefined;
  if (haproxyBinary === undefined) {
    const front = createTcpServer({ noDelay: true }, withFrontDoor(server, false));
    front.maxConnections = config.edge.maxConnections;
    // The HTTP server never listens itself: its head/request timeout checks start on 'listening'.
    front.once('listening', () => server.emit('listening'));
    await new Promise<void>((resolve, reject) => {
      front.once('error', reject);
      front.listen(config.port, config.host, () => resolve());
    });
    internal = front;
    listening = true;
    front.once('close', () => (listening = false));
    port = (front.address() as AddressInfo).port;
  } else {
    // HAProxy owns the public port; Node serves the API, dashboard, tunnels and refusal pages behind it.
    const listener = proxyProtocolListener(server, config.edge.headersTimeoutMs, withFrontDoor(server, false));
    internal = listener;
    const files = haproxyFiles(config.dataDir);
    await listenForHaproxy(listener, files.nodeSocket);
    // With HTTPS on, HAProxy terminates TLS with the manager's certificates (loaded over its runtime
    // API) and hands requests it terminated to Node on a port of their own: never redirected, https.
    let tls: { port: number; certificates: CertificateManager } | undefined;
    if (certificates !== undefined && config.https !== undefined) {
      const handoff = http.createServer(boundedServerOptions(config.edge), handleRequest);
      edgeServer(handoff);
      const handoffListener = proxyProtocolListener(handoff, config.edge.headersTimeoutMs, withFrontDoor(handoff, true));
      tlsHandoff = { server: handoff, listener: handoffListener };
      await listenForHaproxy(handoffListener, files.nodeTlsSocket);
      tls = { port: 0, certificates };
    }
    // An ephemeral public port (SLIPWAY_PORT=0: tests, benchmarks) is probed free, then bound by
    // HAProxy: another process may take it in between, so a bind refusal there picks new ports.
    const ephemeral = config.port === 0 && (config.https === undefined || config.https.port === 0);
    for (let attempt = 1; ; attempt++) {
      port = config.port === 0 ? await freePort(config.host) : config.port;
      if (tls !== undefined && config.https !== undefined) {
        httpsPort = config.https.port === 0 ? await freePort(config.host) : config.https.port;
        tls = { ...tls, port: httpsPort };
      }
      haproxy = new HaproxyDataPlane({
        binary: haproxyBinary,
        dataDir: config.dataDir,
        domain: config.domain,
        table,
        bindHost: config.host,
        bindPort: port,
        limits: config.edge,
        publicProtocol: config.publicUrl.protocol.replace(':', ''),
        // With HTTPS on, the plain port answers ACME challenges and 308s from Node (which knows the
        // certificates): HAProxy passes plain requests to Node; requests over TLS take the fast path.
        fastPath: config.https === undefined,
        // On a host shared with Node and the apps, fewer threads than CPUs. Measured on 2 CPUs
        // (bench/tunnel, issue 14): one thread used 19–21 µs of CPU per tunnel request, two 23–29 µs;
        // app traffic (bench/router) showed no difference beyond the noise.
        threads: config.haproxyThreads,
        tls,
        log,
      });
      try {
        await haproxy.start();
        break;
      } catch (err) {
        await haproxy.close().catch(() => undefined);
        if (ephemeral && attempt < 5 && /address already in use/i.test(String(err))) {
          log('warn', `HAProxy could not bind the ephemeral port ${port} (taken meanwhile); trying another`);
          continue;
        }
        listener.close();
        tlsHandoff?.listener.close();
        await tunnels.close();
        await closeControlPlane();
        throw err;
      }
    }
  }
  // Behind the listener: recovery never delays the first answer (the API, every app already up).
  lifecycle.recoverInBackground(recovery);
  if (config.port === 0 && config.publicUrl.port === '0') config.publicUrl.port = String(port);

  // The TLS port (Node plane): the same handler, each handshake answered with the certificate for its SNI name.
  let secureServer: https.Server | undefined;
  if (certificates !== undefined && config.https !== undefined && haproxy === undefined) {
    const tlsServer = https.createServer(
      {
        ...boundedServerOptions(config.edge),
        SNICallback: (servername, done) => {
          const context = certificates.secureContextFor(servername);
          if (context === undefined) done(new Error(`no certificate for ${servername}`));
          else done(null, context);
        },
      },
      handleRequest,
    );
    edgeServer(tlsServer);
    const httpsSettings = config.https;
    await new Promise<void>((resolve, reject) => {
      tlsServer.once('error', reject);
      tlsServer.listen(httpsSettings.port, config.host, () => resolve());
    });
    secureServer = tlsServer;
    httpsPort = (tlsServer.address() as AddressInfo).port;
  }
  await edgeCertificates?.start();
  const hostForUrl = config.host.includes(':') ? `[${config.host}]` : config.host;

  let closing: Promise<void> | undefined;
  return {
    url: `http://${hostForUrl === '0.0.0.0' ? '127.0.0.1' : hostForUrl}:${port}`,
    port,
    httpsPort: certificates === undefined ? undefined : httpsPort,
    generatedAdmin: admin?.generatedPassword === undefined ? undefined : { email: admin.email, password: admin.generatedPassword },
    instanceId,
    dataPlane: haproxy === undefined ? 'node' : 'haproxy',
    haproxyPid: () => haproxy?.pid,
    close: () => {
      closing ??= (async () => {
        await haproxy?.close();
        internal?.close();
        tlsHandoff?.listener.close();
        tlsHandoff?.server.closeAllConnections();
        await tunnels.close();
        await certificates?.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        if (secureServer !== undefined) {
          const tlsServer = secureServer;
          await new Promise<void>((resolve) => {
            tlsServer.close(() => resolve());
            tlsServer.closeAllConnections();
          });
        }
        await closeControlPlane();
      })();
      return closing;
    },
  };
}

function safeJson(detail: object): string {
  try {
    return JSON.stringify(detail, (_key, value: unknown) => (value instanceof Error ? { name: value.name, message: value.message } : value));
  } catch {
    return '';
  }
}
