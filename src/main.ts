// Composition root: the server as a list of parts, each built in its own room, started in order and stopped in reverse.
import { Registry } from 'prom-client';
import { apiPart } from './api/api-part.js';
import { edgePart, type EdgePorts } from './api/edge-listeners.js';
import { createServerMetrics, type ServerMetrics } from './api/server-metrics.js';
import type { Config } from './config.js';
import { Background } from './core/background.js';
import type { Log } from './core/log.js';
import { Parts } from './core/parts.js';
import { lockDataDir } from './data-dir-lock.js';
import { coordinationPart, databasePart } from './db/database-part.js';
import { storesPart } from './db/stores.js';
import type { BuildSlots } from './deploy/fair-build-slots.js';
import type { AppEvents } from './domain/app-events.js';
import { lifecyclePart } from './deploy/lifecycle-part.js';
import { dataPlanesPart, planeStatus, type DataPlanes } from './proxy/data-planes.js';
import { runnerId } from './runner-id.js';
import type { ContainerEngine } from './runtime/engine.js';
import { runtimePart } from './runtime/runtime-part.js';
import { httpsPart } from './tls/https-part.js';
import { tunnelsPart } from './tunnel/tunnels-part.js';
import { databasesPart } from './databases/databases-part.js';
import { restoreRebuildsPart } from './operate/restore-rebuilds.js';
import { scheduledSelfBackups } from './operate/self-backup-schedule.js';
import { addWorkloads } from './workload-parts.js';
import { authenticateBearer } from './domain/accounts.js';
import { toErrorResponse } from './api/errors.js';
import { endSocketWithError } from './api/socket-errors.js';

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
  /** What happens to running apps (`app.crashed`), for whoever subscribes (see docs/app-health.md). */
  readonly appEvents: AppEvents;
  close(): Promise<void>;
}

export interface StartOptions {
  /** Engine to use instead of the one DOCKER_HOST names (tests). */
  engine?: ContainerEngine;
  log?: Log;
  /** Environment base for git children (PATH, HOME). */
  gitEnv?: Record<string, string>;
  /** Where builds wait for a slot instead of the fair scheduler (bench/fair-builds compares policies). */
  buildSlots?: BuildSlots;
  /** The clock two-factor codes are checked against (tests drive it to the next 30 s step). */
  now?: () => number;
}

/** What the control plane hands the edge and the running server. */
type ControlPlane = Awaited<ReturnType<typeof addControlPlane>>;

/** Starts Slipway: the data directory's lock, migrations, admin bootstrap, reconciliation, then the listeners. */
export async function startServer(startConfig: Config, options: StartOptions = {}): Promise<RunningServer> {
  // A private copy: with SLIPWAY_PORT=0 the app URLs take the port the listener actually gets.
  const config: Config = { ...startConfig, publicUrl: new URL(startConfig.publicUrl.href) };
  const log = options.log ?? stderrLog(config);
  const runner = await runnerId(config.dataDir);
  // One process per data directory (on SQLite, the one instance): a second is refused, naming the holder.
  const dirLock = await lockDataDir(config.dataDir, runner);
  const parts = new Parts(log);
  parts.add('the data directory lock', { offers: dirLock, stop: () => dirLock.release() });
  try {
    const control = await addControlPlane(parts, config, options, runner, log);
    const ports = addEdge(parts, config, control, log);
    await parts.start();
    return runningServer(config, control, ports, () => parts.stop());
  } catch (err) {
    await parts.stop();
    throw err;
  }
}

/** The parts behind the listeners, in dependency order: planes, database, stores, runtime, lifecycle, tunnels, HTTPS, API. */
async function addControlPlane(parts: Parts, config: Config, options: StartOptions, runner: string, log: Log) {
  // Read at scrape time: the tunnel server is built below.
  let liveTunnels = (): number => 0;
  const planes: DataPlanes = parts.add('data planes', await dataPlanesPart(config, log, (app, status, seconds) => metrics.requestEnded(app, status, seconds)));
  const metrics: ServerMetrics = createServerMetrics(new Registry(), {
    liveTunnels: () => liveTunnels(),
    dataPlane: () => planeStatus(planes),
    // Live app traffic bypasses the Node proxy under HAProxy: its counters are read at each scrape.
    ...(planes.haproxyBinary === undefined ? {} : { haproxyServers: async () => (planes.haproxy === undefined ? [] : planes.haproxy.appStats(AbortSignal.timeout(2000))) }),
  });
  const database = parts.add('database', await databasePart(config));
  const { db, instanceId, cipher } = database;
  const coordination = parts.add('coordination', await coordinationPart(config, log));
  // Timers, watchers and leader-only work: registered by the parts below, started after them, stopped before them.
  const background = new Background(coordination, log);
  const stores = parts.add('stores', await storesPart({ config, db, cipher, coordination, runner, log }));
  background.add(stores.auditPruning);
  const selfBackups = scheduledSelfBackups(config, log, database);
  if (selfBackups !== undefined) background.add(selfBackups);
  const engineRuntime = parts.add('runtime', await runtimePart(config, instanceId, log, options.engine));
  // Managed databases (decisions §19): every release gets its linked databases through the runtime.
  const databases = parts.add('databases', await databasesPart({
    config, log, stores, instanceId, self: runner, background, engine: engineRuntime.engine, services: engineRuntime.services, engineUp: engineRuntime.engineUp,
    liveInstances: () => stores.registry.liveIds(new Date()),
    authenticate: (bearer) => authenticateBearer(stores.accounts, stores.keyUsage, bearer),
    refuse: (socket, err) => { const { status, body } = toErrorResponse(err); endSocketWithError(socket, status, body); },
    leadsAlone: async () => coordination.isLeader() && (config.databaseUrl === undefined || ![...(await stores.registry.liveUrls(new Date())).keys()].some((id) => id !== runner)),
  }));
  const runtime = { ...engineRuntime, runtime: databases.wrap(engineRuntime.runtime) };
  const deploy = parts.add('lifecycle', await lifecyclePart({
    config, log, self: runner, instanceId, coordination, background, stores, runtime, planes,
    onBuildEnd: (outcome, seconds) => metrics.buildEnded(outcome, seconds),
    buildSlots: options.buildSlots,
    gitEnv: options.gitEnv,
  }));
  const { backups, jobs, notifications } = await addWorkloads(parts, { config, log, runner, database, stores, background, databases, deploy, runtime });
  const { tunnels, acrossInstances, directory } = parts.add('tunnels', await tunnelsPart({
    config, log, self: runner, cipher, coordination, claims: stores.tunnelClaims, registry: stores.registry, accounts: stores.accounts,
    keyUsage: stores.keyUsage, table: planes.table, localPlane: planes.localPlane, dataPlane: deploy.dataPlane, background,
  }));
  liveTunnels = () => tunnels.connectedCount();
  const https = parts.add('https', await httpsPart({ config, log, self: runner, coordination, challenges: stores.challenges, repository: stores.certificates, table: planes.table, events: deploy.appEvents, background }));
  const api = parts.add('api', await apiPart({
    ...stores, config, log, metrics, cipher, coordination, self: runner, gitEnv: deploy.gitEnv, now: options.now,
    deployments: stores.catalog, store: stores.sources, operations: deploy.lifecycle, appHealth: deploy.appHealth, quotas: deploy.quotas, tunnels: directory, databases: databases.context, backups, jobs,
    hosts: deploy.hosts, certificates: https.domainCertificates, instances: stores.registry, nodes: deploy.nodes, notifications,
    checks: {
      pingDatabase: stores.ping,
      coordinationProblem: () => coordination.problem(),
      pingEngine: (signal) => runtime.engine.ping(signal),
      recovering: () => deploy.lifecycle.recoveringCount,
    },
    settled: () => planes.haproxy?.settled(2000),
  }));
  parts.add('background work', { offers: background, start: () => background.start(), stop: () => background.stop() });
  return { planes, metrics, deploy, tunnels, acrossInstances, https, api, instanceId, admin: stores.admin, databases };
}

/** The listeners last; then, behind them, recovery and the first certificate orders (the CA validates through the edge). */
function addEdge(parts: Parts, config: Config, control: ControlPlane, log: Log): EdgePorts {
  const { planes, metrics, deploy, tunnels, acrossInstances, https, api, databases } = control;
  const ports = parts.add('edge', edgePart({
    config, log, planes, api, tunnels, acrossInstances, databases, tls: https.edge,
    onRequestEnd: (app, status, seconds) => metrics.requestEnded(app, status, seconds),
  }));
  // Behind the listener: recovery never delays the first answer (the API, every app already up).
  parts.add('recovery', { offers: undefined, start: () => deploy.lifecycle.recoverInBackground(deploy.recovery) });
  parts.add('restore rebuilds', restoreRebuildsPart({ dataDir: config.dataDir, deploy: (p, id, o) => deploy.lifecycle.deploy(p, id, o), log }));
  parts.add('certificate orders', { offers: undefined, start: () => https.orderCertificates() });
  return ports;
}

function runningServer(config: Config, control: ControlPlane, ports: EdgePorts, close: () => Promise<void>): RunningServer {
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const { admin, planes } = control;
  return {
    url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${ports.port}`,
    port: ports.port,
    httpsPort: ports.httpsPort,
    generatedAdmin: admin?.generatedPassword === undefined ? undefined : { email: admin.email, password: admin.generatedPassword },
    instanceId: control.instanceId,
    dataPlane: planes.haproxy === undefined ? 'node' : 'haproxy',
    haproxyPid: () => planes.haproxy?.pid,
    appEvents: control.deploy.appEvents,
    close,
  };
}

function stderrLog(config: Config): Log {
  return (level, msg, detail) => {
    if (config.logLevel === 'silent') return;
    const line = detail === undefined ? msg : `${msg} ${safeJson(detail)}`;
    process.stderr.write(`[slipway] ${level}: ${line}\n`);
  };
}

function safeJson(detail: object): string {
  try {
    return JSON.stringify(detail, (_key, value: unknown) => (value instanceof Error ? { name: value.name, message: value.message } : value));
  } catch {
    return '';
  }
}
