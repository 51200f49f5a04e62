// The HAProxy data plane: mirrors the routing table into a supervised HAProxy through its runtime API, never reloading it.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EdgeLimits } from '../../config.js';
import type { RoutingTable, Upstream } from '../routing-table.js';
import type { CertificateSource, TlsCertificate } from '../certificate-source.js';
import { APPS_BACKEND, errorPageFiles, renderCountMap, renderHaproxyConfig, renderHostMap, type AppServer, type HaproxyFiles } from './haproxy-config.js';
import { HaproxyProcess } from './haproxy-process.js';
import { isSafeWord, RuntimeApi } from './runtime-api.js';

type Log = (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;

/** One app server's figures from HAProxy's `show stat` (counters since the server was added). */
export interface AppServerStats {
  readonly server: string;
  /** The subdomain it serves, or last served (an old release draining); undefined if unknown. */
  readonly app: string | undefined;
  /** Whether a host maps to it now (false: draining, or the retired tally). */
  readonly serving: boolean;
  /** Responses by status class; `none` is HAProxy's `hrsp_other` (no valid status sent). */
  readonly responses: Readonly<Record<'1xx' | '2xx' | '3xx' | '4xx' | '5xx' | 'none', number>>;
  /** HAProxy's average total time of the server's last 1024 requests. */
  readonly averageSeconds: number;
}

export interface HaproxyDataPlaneOptions {
  readonly binary: string;
  readonly dataDir: string;
  readonly domain: string;
  readonly table: RoutingTable;
  readonly bindHost: string;
  readonly bindPort: number;
  readonly limits: EdgeLimits;
  readonly publicProtocol: string;
  /** Whether live app hosts go straight to their app on the plain port (false: every plain request goes to Node). */
  readonly fastPath: boolean;
  /** HAProxy's threads (`SLIPWAY_HAPROXY_THREADS`). */
  readonly threads: number;
  /**
   * HTTPS terminated by HAProxy: the TLS port and where certificates come from (loaded over the
   * runtime API, never written to disk). Requests over TLS reach Node on `files.nodeTlsSocket`.
   */
  readonly tls?: { readonly port: number; readonly certificates: CertificateSource } | undefined;
  readonly log: Log;
}

/** A server of the apps backend: which upstream it points at. */
interface ServerEntry extends AppServer {
  readonly key: string;
  /** The subdomain it last served (for the request metrics of a server removed since). */
  app?: string;
}

type StatusCounts = Record<'1xx' | '2xx' | '3xx' | '4xx' | '5xx' | 'none', number>;

/**
 * The settings of a server added at run time. Weight 0: a request reaches it only through the
 * host map (see the apps backend). The idle-pool settings are a configured server's defaults, which
 * `add server` does not apply in HAProxy 2.6: without them it closes the connection to the app after
 * every response and opens a new one for the next request (measured with a keep-alive app behind
 * Docker's port: 0.06× the app's direct rate, 87 ms per request; with them, the connection is reused).
 */
const DYNAMIC_SERVER_SETTINGS = ['weight', '0', 'pool-max-conn', '-1', 'pool-purge-delay', '5s'] as const;

/** How often drain() looks at a server's current sessions. */
const DRAIN_POLL_MS = 50;
/** How long an unused server may keep idle connections before its removal is given up (it stays in maintenance). */
const REMOVE_FOR_MS = 60_000;

/**
 * Serves app hosts with HAProxy. The routing table stays the one source of truth (the control plane
 * writes only to it); this class follows its changes: a live route becomes a host-map entry naming
 * a dynamic server of the `apps` backend, anything else is served by the Node process behind
 * HAProxy (404/503 pages, tunnels, the API). All runtime API work runs one step at a time, in order,
 * and so do restarts of HAProxy, which write the configuration and map for the model of the moment.
 */
export class HaproxyDataPlane {
  readonly #options: HaproxyDataPlaneOptions;
  readonly #files: HaproxyFiles;
  readonly #api: RuntimeApi;
  readonly #process: HaproxyProcess;
  /** upstream "host:port" → its server */
  readonly #servers = new Map<string, ServerEntry>();
  /** public host → its servers' names, one per replica (the host and count maps) */
  readonly #hosts = new Map<string, readonly string[]>();
  /** Responses of removed servers, by the subdomain they served: read just before each removal. */
  readonly #retired = new Map<string, StatusCounts>();
  #queue: Promise<unknown> = Promise.resolve();
  #serial = 0;
  #unsubscribe: (() => void) | undefined;
  #closed = false;
  /** Certificate names loaded into the running HAProxy (a restart starts from none). */
  readonly #loadedCerts = new Set<string>();

  constructor(options: HaproxyDataPlaneOptions) {
    this.#options = options;
    this.#files = haproxyFiles(options.dataDir);
    this.#api = new RuntimeApi(this.#files.socket);
    this.#process = new HaproxyProcess({
      binary: options.binary,
      configFile: this.#files.config,
      pidFile: path.join(this.#files.dir, 'haproxy.pid'),
      api: this.#api,
      exclusive: (work) => this.#exclusive(work),
      prepare: () => this.#writeFiles(),
      loaded: () => this.#loadCertificates(),
      log: options.log,
    });
  }

  /** The running HAProxy's pid (tests watch it to prove no reload or restart happened). */
  get pid(): number | undefined {
    return this.#process.pid;
  }

  get files(): HaproxyFiles {
    return this.#files;
  }

  /** Loads the table's routes, starts HAProxy with them, then follows every change. */
  async start(): Promise<void> {
    const { table, domain } = this.#options;
    for (const [subdomain] of table.entries()) this.#model(`${subdomain}.${domain}`);
    for (const [hostname] of table.hosts()) this.#model(hostname);
    const follow = (hosts: () => string[]): void => {
      void this.#exclusive(() => this.#apply(hosts())).catch((err: unknown) => {
        // HAProxy may be restarting: the restart writes the model, which already holds this change.
        this.#options.log('warn', 'HAProxy route change not applied at run time', { error: errorText(err) });
      });
    };
    const unsubscribeRoutes = table.subscribe((subdomain) => {
      // The subdomain's own host and every custom domain standing for it (read when applied).
      follow(() => [`${subdomain}.${domain}`, ...[...table.hosts()].filter(([, alias]) => alias.subdomain === subdomain).map(([hostname]) => hostname)]);
    });
    const unsubscribeHosts = table.subscribeHosts((hostname) => follow(() => [hostname]));
    const certificates = this.#options.tls?.certificates;
    const unsubscribeCerts = certificates?.subscribe((hostname, certificate) => {
      void this.#exclusive(async () => {
        if (this.#process.pid === undefined) return; // down: its restart loads every certificate
        if (certificate === undefined) await this.#unloadCertificate(certName(hostname));
        else await this.#loadCertificate(certName(hostname), certificate);
      }).catch((err: unknown) => this.#options.log('warn', `HAProxy certificate change for ${hostname} not applied`, { error: errorText(err) }));
    });
    this.#unsubscribe = () => {
      unsubscribeRoutes();
      unsubscribeHosts();
      unsubscribeCerts?.();
    };
    await this.#process.start();
  }

  /**
   * Resolves once no session is open on `upstream`'s server (or after `timeoutMs`): the route
   * changes queued before this call are applied first. The server is removed once it is unused.
   */
  async drain(upstream: Upstream, timeoutMs: number): Promise<void> {
    const key = upstreamKey(upstream);
    const deadline = Date.now() + timeoutMs;
    await this.#exclusive(async () => undefined).catch(() => undefined);
    while (!this.#closed && Date.now() < deadline) {
      const server = this.#servers.get(key);
      if (server === undefined) return;
      const sessions = await this.#sessions(server.name).catch(() => undefined);
      if (sessions === 0) break;
      await sleep(DRAIN_POLL_MS);
    }
    void this.#removeWhenUnused(key);
  }

  /**
   * Resolves once every route change made so far has reached HAProxy (or after `timeoutMs`): the
   * API answers a change only then, so a visitor's next request already sees it.
   */
  async settled(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.#exclusive(async () => undefined).catch(() => undefined),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  /** Stops following the table and stops HAProxy. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe?.();
    // Stopped in turn after the work queued so far (a route change may be writing the host map):
    // once this resolves nothing writes HAProxy's files (a caller may delete them; a test did, and
    // its delete failed with ENOTEMPTY under load).
    await this.#process.stop();
  }

  /** Runs `work` after every earlier piece of work has finished (success or not). */
  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Updates the model of one public host from the routing table as it is now (so queued changes
   * converge on the latest state); returns what the runtime must be told.
   */
  #model(host: string): { servers: readonly ServerEntry[]; created: readonly ServerEntry[]; previous: readonly string[] } {
    const previous = this.#hosts.get(host) ?? [];
    const route = this.#options.table.resolveHost(host)?.route;
    if (route?.kind !== 'app' || route.state !== 'live' || route.upstreams.length === 0 || !isSafeWord(host)) {
      this.#hosts.delete(host);
      return { servers: [], created: [], previous };
    }
    const servers: ServerEntry[] = [];
    const created: ServerEntry[] = [];
    for (const upstream of route.upstreams) {
      const key = upstreamKey(upstream);
      let server = this.#servers.get(key);
      if (server === undefined) {
        this.#serial += 1;
        server = { key, name: `u${upstream.port}_${this.#serial}`, host: upstream.host, port: upstream.port };
        this.#servers.set(key, server);
        created.push(server);
      }
      server.app = this.#options.table.resolveHost(host)?.subdomain ?? server.app;
      servers.push(server);
    }
    this.#hosts.set(host, servers.map((s) => s.name));
    return { servers, created, previous };
  }

  /**
   * Tells HAProxy one host's servers: new servers added, then each replica's map entry, then the
   * count (a request never picks a replica index without a server), then surplus entries removed.
   */
  async #apply(hosts: readonly string[]): Promise<void> {
    for (const host of hosts) {
      if (this.#closed) return;
      const { servers, created, previous } = this.#model(host);
      await this.#writeMap();
      if (this.#process.pid === undefined) continue; // down: its restart loads the files just written
      for (const server of created) {
        await this.#api.expect(['add', 'server', `${APPS_BACKEND}/${server.name}`, `${server.host}:${server.port}`, ...DYNAMIC_SERVER_SETTINGS], ['New server registered']);
        await this.#api.expect(['enable', 'server', `${APPS_BACKEND}/${server.name}`]);
      }
      const names = servers.map((s) => s.name);
      for (const [i, name] of names.entries()) {
        if (previous[i] !== name) await this.#api.expect([previous[i] === undefined ? 'add' : 'set', 'map', this.#files.hostMap, `${host}/${i}`, name]);
      }
      if (names.length !== previous.length) {
        if (names.length === 0) await this.#api.expect(['del', 'map', this.#files.countMap, host]);
        else await this.#api.expect([previous.length === 0 ? 'add' : 'set', 'map', this.#files.countMap, host, String(names.length)]);
      }
      for (let i = names.length; i < previous.length; i++) await this.#api.expect(['del', 'map', this.#files.hostMap, `${host}/${i}`]);
      // The servers the host used before go once their sessions have ended (drain() waits for that).
      for (const name of previous) {
        if (names.includes(name)) continue;
        const old = [...this.#servers.values()].find((s) => s.name === name);
        if (old !== undefined) void this.#removeWhenUnused(old.key);
      }
    }
  }

  /**
   * Response counts by status class and the average response time of each app server HAProxy
   * serves directly (requests it hands to Node, such as 404/503 pages and tunnels, are counted
   * there), with the subdomain each server stands for; plus a `retired:<app>` row per app holding
   * the final counts of its removed servers, so the sum per app never goes down while HAProxy runs.
   */
  async appStats(signal?: AbortSignal): Promise<AppServerStats[]> {
    // In turn with removals: a server is either still listed or already in the retired tally, never both or neither.
    return this.#exclusive(async () => {
      const out: AppServerStats[] = [...this.#retired].map(([app, responses]) => ({ server: `retired:${app}`, app, serving: false, responses: { ...responses }, averageSeconds: Number.NaN }));
      if (this.#process.pid === undefined) return out;
      const rows = await this.#serverStats(signal);
      const inUse = new Set([...this.#hosts.values()].flat());
      const appOf = new Map([...this.#servers.values()].map((s) => [s.name, s.app]));
      for (const row of rows) out.push({ ...row, app: appOf.get(row.server), serving: inUse.has(row.server) });
      return out;
    });
  }

  /** Every app server's response counts and average time, from `show stat`. */
  async #serverStats(signal?: AbortSignal): Promise<Array<{ server: string; responses: StatusCounts; averageSeconds: number }>> {
    const csv = await this.#api.run(['show', 'stat', APPS_BACKEND, '4', '-1'], signal);
    const lines = csv.split('\n');
    const header = (lines[0] ?? '').replace(/^# /, '').split(',');
    const at = (fields: string[], title: string): number => Number(fields[header.indexOf(title)] ?? 0) || 0;
    const out = [];
    for (const line of lines.slice(1)) {
      const fields = line.split(',');
      const name = fields[header.indexOf('svname')];
      if (name === undefined || name === '' || name === 'BACKEND' || name === 'FRONTEND') continue;
      out.push({
        server: name,
        responses: {
          '1xx': at(fields, 'hrsp_1xx'),
          '2xx': at(fields, 'hrsp_2xx'),
          '3xx': at(fields, 'hrsp_3xx'),
          '4xx': at(fields, 'hrsp_4xx'),
          '5xx': at(fields, 'hrsp_5xx'),
          none: at(fields, 'hrsp_other'),
        },
        averageSeconds: at(fields, 'ttime') / 1000,
      });
    }
    return out;
  }

  /** After a start or restart: every certificate the source holds, loaded into the new process. */
  async #loadCertificates(): Promise<void> {
    this.#loadedCerts.clear();
    const certificates = this.#options.tls?.certificates;
    if (certificates === undefined) return;
    if (certificates.operator !== undefined) await this.#loadCertificate(OPERATOR_CERT, certificates.operator);
    for (const [hostname, certificate] of certificates.issued()) {
      await this.#loadCertificate(certName(hostname), certificate).catch((err: unknown) => {
        this.#options.log('warn', `HAProxy did not take the certificate of ${hostname}`, { error: errorText(err) });
      });
    }
  }

  /** Creates (or replaces) an in-memory certificate and lists it for SNI: `new`/`set`/`commit ssl cert`, `add ssl crt-list`. */
  async #loadCertificate(name: string, certificate: TlsCertificate): Promise<void> {
    const known = this.#loadedCerts.has(name);
    if (!known) await this.#api.expect(['new', 'ssl', 'cert', name], ['New empty certificate store']);
    const answer = await this.#api.runWithPayload(['set', 'ssl', 'cert', name], `${certificate.certPem.trim()}\n${certificate.keyPem.trim()}`);
    if (!answer.includes('Transaction created') && !answer.includes('Transaction updated')) {
      await this.#api.run(['abort', 'ssl', 'cert', name]).catch(() => undefined);
      throw new Error(`HAProxy refused the certificate ${name}: ${answer.split('\n')[0] ?? ''}`);
    }
    await this.#api.expect(['commit', 'ssl', 'cert', name], ['Committing', 'Success']);
    if (!known) await this.#api.expect(['add', 'ssl', 'crt-list', this.#files.crtList, name], ['Inserting', 'Success']);
    this.#loadedCerts.add(name);
  }

  async #unloadCertificate(name: string): Promise<void> {
    if (!this.#loadedCerts.has(name)) return;
    await this.#api.expect(['del', 'ssl', 'crt-list', this.#files.crtList, name], ['Entry', 'Success']);
    await this.#api.expect(['del', 'ssl', 'cert', name], ['Certificate', 'Success']);
    this.#loadedCerts.delete(name);
  }

  /** Current plus queued sessions of a server, from `show stat`. */
  async #sessions(name: string): Promise<number> {
    const csv = await this.#api.run(['show', 'stat', APPS_BACKEND, '4', '-1']);
    const lines = csv.split('\n');
    const header = (lines[0] ?? '').replace(/^# /, '').split(',');
    const column = (title: string): number => header.indexOf(title);
    for (const line of lines.slice(1)) {
      const fields = line.split(',');
      if (fields[column('svname')] !== name) continue;
      return Number(fields[column('scur')] ?? 0) + Number(fields[column('qcur')] ?? 0);
    }
    return 0;
  }

  /** Removes a server no host uses any more: maintenance, then `del server`, retried while it holds connections. */
  async #removeWhenUnused(key: string): Promise<void> {
    const deadline = Date.now() + REMOVE_FOR_MS;
    let delay = 200;
    while (!this.#closed && Date.now() < deadline) {
      const done = await this.#exclusive(async () => {
        const server = this.#servers.get(key);
        if (server === undefined) return true;
        if ([...this.#hosts.values()].some((names) => names.includes(server.name))) return true; // in use again
        if (this.#process.pid === undefined) {
          this.#servers.delete(key);
          return true;
        }
        const name = `${APPS_BACKEND}/${server.name}`;
        await this.#api.expect(['set', 'server', name, 'state', 'maint']);
        // In maintenance it takes no new request: its counts are final. Kept for the metrics.
        const counts = (await this.#serverStats().catch(() => [])).find((row) => row.server === server.name);
        const answer = await this.#api.run(['del', 'server', name]);
        if (answer.startsWith('Server deleted') || answer.includes('No such server')) {
          this.#servers.delete(key);
          if (counts !== undefined && server.app !== undefined) {
            const total = this.#retired.get(server.app) ?? { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, none: 0 };
            for (const c of Object.keys(total) as Array<keyof StatusCounts>) total[c] += counts.responses[c];
            this.#retired.set(server.app, total);
          }
          return true;
        }
        return false;
      }).catch(() => false);
      if (done) return;
      await sleep(delay);
      delay = Math.min(delay * 2, 5000);
    }
  }

  /** Writes the configuration, error bodies and host map for the model of the moment (before a start). */
  async #writeFiles(): Promise<void> {
    const options = this.#options;
    await fs.mkdir(this.#files.dir, { recursive: true, mode: 0o700 });
    for (const [name, body] of Object.entries(errorPageFiles())) await writeAtomically(path.join(this.#files.dir, name), body);
    await this.#writeMap();
    // Servers no host uses are not declared again: their sessions ended with the old process.
    const used = new Set([...this.#hosts.values()].flat());
    for (const [key, server] of this.#servers) if (!used.has(server.name)) this.#servers.delete(key);
    await writeAtomically(
      this.#files.config,
      renderHaproxyConfig({
        files: this.#files,
        bindHost: options.bindHost,
        bindPort: options.bindPort,
        limits: options.limits,
        publicProtocol: options.publicProtocol,
        fastPath: options.fastPath,
        threads: options.threads,
        tls: options.tls === undefined ? undefined : { bindPort: options.tls.port },
        servers: [...this.#servers.values()],
        domain: options.domain,
      }),
    );
    // Empty on disk: keys exist only in HAProxy's memory (loaded after the start).
    await writeAtomically(this.#files.crtList, '');
    await fs.rm(this.#files.socket, { force: true });
  }

  async #writeMap(): Promise<void> {
    await writeAtomically(this.#files.hostMap, renderHostMap(this.#hosts));
    await writeAtomically(this.#files.countMap, renderCountMap(this.#hosts));
  }
}

/**
 * HAProxy's files under `<data>/haproxy/`, unless that path could not be written into a runtime
 * API command or a Unix socket address (spaces, or too long): then a private directory under the
 * system temp dir, named after the data dir.
 */
export function haproxyFiles(dataDir: string): HaproxyFiles {
  let dir = path.join(dataDir, 'haproxy');
  if (!isSafeWord(dir) || Buffer.byteLength(path.join(dir, 'admin.sock')) > 100) {
    dir = path.join(os.tmpdir(), `slipway-haproxy-${crypto.createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`);
  }
  return {
    dir,
    config: path.join(dir, 'haproxy.cfg'),
    hostMap: path.join(dir, 'hosts.map'),
    countMap: path.join(dir, 'replicas.map'),
    socket: path.join(dir, 'admin.sock'),
    crtList: path.join(dir, 'certs.list'),
    nodeSocket: path.join(dir, 'node.sock'),
    nodeTlsSocket: path.join(dir, 'node-tls.sock'),
  };
}

/**
 * Binds one of the Node process's listeners for HAProxy (`files.nodeSocket` or `nodeTlsSocket`):
 * in HAProxy's private directory (created 0700 here), replacing a socket file a crashed process left.
 */
export async function listenForHaproxy(server: net.Server, socketPath: string): Promise<void> {
  await fs.mkdir(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  await fs.rm(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function writeAtomically(file: string, content: string): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(temp, content, { mode: 0o600 });
  await fs.rename(temp, file);
}

/** The virtual name (no file) of the operator's certificate in HAProxy. */
const OPERATOR_CERT = '/slipway-tls/operator.pem';

/** The virtual name of a host's ACME certificate (host names are safe words). */
function certName(hostname: string): string {
  return `/slipway-tls/${hostname}.pem`;
}

function upstreamKey(upstream: Upstream): string {
  return `${upstream.host}:${upstream.port}`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
