// Configuration: the environment parsed once, field by field; a bad value stops the start.
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { JobSchedule } from './core/cron-schedule.js';
import { objectName } from './core/object-name.js';

/** Server settings (decisions §1 plus the operational knobs documented in docs/configuration.md). */
export interface Config {
  /** SLIPWAY_PORT: the one HTTP port (API, dashboard, app routing, tunnels). */
  readonly port: number;
  /** SLIPWAY_HOST: listen address. */
  readonly host: string;
  /** SLIPWAY_DOMAIN: apps are served at `<subdomain>.<domain>`. */
  readonly domain: string;
  /** SLIPWAY_DATA_DIR: SQLite database, uploads, build logs (absolute). */
  readonly dataDir: string;
  /** SLIPWAY_DATABASE_URL: `postgres://…` to use PostgreSQL; undefined = embedded SQLite. */
  readonly databaseUrl: string | undefined;
  /** SLIPWAY_INSTANCE_URL: where the other instances reach this one (several instances on PostgreSQL, decisions §15). */
  readonly instanceUrl: string | undefined;
  /** SLIPWAY_ADMIN_EMAIL / SLIPWAY_ADMIN_PASSWORD: admin created on a start with no users. */
  readonly adminEmail: string | undefined;
  readonly adminPassword: string | undefined;
  /** SLIPWAY_MAX_UPLOAD_BYTES: largest archive accepted. */
  readonly maxUploadBytes: number;
  /** SLIPWAY_MAX_EXPANDED_BYTES: largest total size of an archive's extracted files. */
  readonly maxExpandedBytes: number;
  /** SLIPWAY_MAX_ARCHIVE_ENTRIES: most entries an archive may hold. */
  readonly maxArchiveEntries: number;
  /** SLIPWAY_ALLOW_PRIVATE_GIT: allow file:// and loopback/private git hosts. */
  readonly allowPrivateGit: boolean;
  /** SLIPWAY_INSECURE_FAST_PASSWORD_HASHING: new password hashes at 1/96 of the standard scrypt work (test suites only: never in production). */
  readonly insecureFastPasswordHashing: boolean;
  /** SLIPWAY_ALLOW_PRIVATE_TARGETS: let outgoing requests a tenant chooses (notification channels, backup targets) reach loopback/private/link-local/metadata addresses. */
  readonly allowPrivateTargets: boolean;
  /** SLIPWAY_PITR_ROUND_SECONDS: how often a database with point-in-time recovery has its log closed (when written to) and archived (docs/backups.md). */
  readonly pitrRoundSeconds: number;
  /** SLIPWAY_INSTANCE_LOST_SECONDS: an instance silent this long is `lost` (its builds and half-created databases taken over); it beats every sixth of it. */
  readonly instanceLostMs: number;
  /** SLIPWAY_SMTP_URL: the mail server e-mail notifications go out through (`smtp://` or `smtps://`, credentials in the URL); undefined = no e-mail. */
  readonly smtpUrl: string | undefined;
  /** SLIPWAY_SMTP_FROM: the sender of e-mail notifications. */
  readonly smtpFrom: string;
  /** DOCKER_HOST: the engine to use; undefined = the local socket. */
  readonly dockerHost: string | undefined;
  /** SLIPWAY_SESSION_TTL_HOURS: lifetime of a login session. */
  readonly sessionTtlMs: number;
  /** SLIPWAY_AUDIT_RETENTION_DAYS: audit entries older than this are dropped. */
  readonly auditRetentionDays: number;
  /** SLIPWAY_MAX_CONCURRENT_BUILDS: builds running at once across all deployments. */
  readonly maxConcurrentBuilds: number;
  /** SLIPWAY_QUOTA_*: each user's quotas unless an administrator sets the user's own (administrators have none). */
  readonly quotas: { readonly deployments: number; readonly concurrent_builds: number; readonly upload_bytes: number; readonly api_keys: number; readonly databases: number };
  /** Live releases started again at once by recovery (after a restart, or containers found stopped). */
  readonly recoveryConcurrency: number;
  /** Between two samples of each running app's metrics history (SLIPWAY_METRICS_INTERVAL_SECONDS, 1 to 60, default 10; an hour of samples is kept). */
  readonly metricsIntervalMs: number;
  /** SLIPWAY_BUILD_TIMEOUT_SECONDS: time limit of one image build (source fetch included). */
  readonly buildTimeoutMs: number;
  /** SLIPWAY_STARTUP_TIMEOUT_SECONDS: time a new container has to pass its health check. */
  readonly startupTimeoutMs: number;
  /** SLIPWAY_KEEP_IMAGES: images of the last N succeeded builds kept per deployment for rollback. */
  readonly keepImages: number;
  /** SLIPWAY_DEFAULT_MEMORY_MB / SLIPWAY_DEFAULT_CPUS: container limits unless a deployment sets its own. */
  readonly defaultMemoryBytes: number;
  readonly defaultNanoCpus: number;
  /** SLIPWAY_MAX_MEMORY_MB / SLIPWAY_MAX_CPUS: ceilings of a deployment's memory_mb / cpus (decisions §13). */
  readonly maxMemoryMb: number;
  readonly maxCpus: number;
  /** SLIPWAY_APP_PIDS_LIMIT: most processes and threads one app container may hold. */
  readonly appPidsLimit: number;
  /** SLIPWAY_BUILD_NETWORK: `confined` (RUN steps reach the internet only) or `none` (no network). */
  readonly buildNetwork: 'confined' | 'none';
  /** SLIPWAY_BUILD_MEMORY_MB / SLIPWAY_BUILD_CPUS / SLIPWAY_BUILD_PIDS_LIMIT: limits of a build's RUN steps. */
  readonly buildMemoryBytes: number;
  readonly buildNanoCpus: number;
  readonly buildPidsLimit: number;
  /** SLIPWAY_BASE_IMAGE_NODE|PYTHON|GO|RUN|STATIC: the base images of generated Dockerfiles (decisions §24). */
  readonly baseImages: { readonly node: string; readonly python: string; readonly go: string; readonly run: string; readonly static: string };
  /** SLIPWAY_PUBLIC_URL: how users reach this server (scheme, host and port of app URLs); default http://<domain>:<port>. */
  readonly publicUrl: URL;
  /** SLIPWAY_TUNNELS_PER_KEY / SLIPWAY_TUNNEL_STREAMS: limits on live tunnels per API key and streams per tunnel. */
  readonly tunnelsPerKey: number;
  readonly streamsPerTunnel: number;
  /** SLIPWAY_LOG_LEVEL: fatal|error|warn|info|debug|trace|silent. */
  readonly logLevel: string;
  /** SLIPWAY_BUILD_LOG_MAX_BYTES: a build log keeps its head and tail within this size, with a marker where it was cut. */
  readonly buildLogMaxBytes: number;
  /** SLIPWAY_SECRET_KEY: the installation key (32 bytes, base64); undefined = `<data>/secret.key`. */
  readonly secretKey: Buffer | undefined;
  /** SLIPWAY_NEW_SECRET_KEY: the key `slipway server rotate-key` moves to when SLIPWAY_SECRET_KEY is used. */
  readonly newSecretKey: Buffer | undefined;
  /** Bounds on receiving requests and on connections (SLIPWAY_*_TIMEOUT_SECONDS, SLIPWAY_MAX_CONNECTIONS*). */
  readonly edge: EdgeLimits;
  /** HTTPS (decisions §8): undefined while SLIPWAY_HTTPS_PORT is unset. */
  readonly https: HttpsSettings | undefined;
  /** SLIPWAY_DATA_PLANE: who serves the public port; undefined = HAProxy when a 2.6+ binary is found, else Node. */
  readonly dataPlane: 'haproxy' | 'node' | undefined;
  /** SLIPWAY_HAPROXY_BIN: the HAProxy binary; undefined = looked for in the usual sbin/bin directories. */
  readonly haproxyBinary: string | undefined;
  /** SLIPWAY_HAPROXY_THREADS: HAProxy's threads; by default half the CPUs (at least 1), the rest left to Node and the apps. */
  readonly haproxyThreads: number;
  /** SLIPWAY_DB_IMAGE_POSTGRES/_MYSQL/_REDIS: the image of each managed database engine (decisions §19). */
  readonly databaseImages: { readonly postgres: string; readonly mysql: string; readonly redis: string };
  /** SLIPWAY_DB_SUBNET_POOL: an IPv4 range (/8 to /26) each database's network takes a /26 of. */
  readonly databaseSubnetPool: string;
  /** SLIPWAY_RUNTIME: where apps run; `docker` (one engine) or `swarm` (services on the swarm whose manager the engine is). */
  readonly runtime: 'docker' | 'swarm';
  /** SLIPWAY_REGISTRY (`host[:port][/prefix]`, with SLIPWAY_REGISTRY_USERNAME/_PASSWORD): where images go under `swarm`. */
  readonly registry: { readonly address: string; readonly username?: string; readonly password?: string } | undefined;
  /** SLIPWAY_REGISTRY_PORT: the port of Slipway's own registry (swarm without SLIPWAY_REGISTRY), on the manager's address. */
  readonly registryPort: number;
  /** SLIPWAY_SWARM_PROBE: a static busybox present on every node, mounted into each task for its health check. */
  readonly swarmProbePath: string;
  /** SLIPWAY_SWARM_NODE_ENGINES: the engines of the swarm's other nodes, read for their replicas' metrics (none: the manager's replicas only). */
  readonly swarmNodeEngines: ReadonlyArray<{ readonly node: string; readonly url: string }>;
  /** SLIPWAY_SWARM_NODE_TLS: the client certificate and CA (read at start) that tcp:// and https:// node engines are dialled with. */
  readonly swarmNodeTls: { readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer } | undefined;
  /** SLIPWAY_SELF_BACKUP_SCHEDULE / _DESTINATION: Slipway's own backups taken by the leader (contract §25); undefined = none. */
  readonly selfBackup: SelfBackupSettings | undefined;
  /** SLIPWAY_SWARM_GUARD: under swarm, run the node guard (a global service keeping containers off every node's published ports); false removes it. */
  readonly swarmGuard: boolean;
}

/** Scheduled self-backups (docs/operating.md). */
export interface SelfBackupSettings {
  /** A cron expression (five fields, or six with seconds), in UTC. */
  readonly schedule: string;
  /** Where they go: a local directory (absolute path), or else a §20 backup destination (its id or name). */
  readonly directory?: string;
  readonly destination?: string;
  /** Backups kept there (older ones are removed after each new one). */
  readonly keep: number;
}

/** HTTPS settings (SLIPWAY_HTTPS_PORT and the ACME/operator certificate settings). */
export interface HttpsSettings {
  /** SLIPWAY_HTTPS_PORT: the TLS port (0: any free port, for tests). */
  readonly port: number;
  /** SLIPWAY_ACME_DIRECTORY_URL: the ACME v2 directory (default Let's Encrypt production). */
  readonly acmeDirectoryUrl: string;
  /** SLIPWAY_ACME_EMAIL: the ACME account's contact. */
  readonly acmeEmail: string | undefined;
  /** SLIPWAY_ACME_CA_FILE: an extra CA the directory's TLS certificate chains to. */
  readonly acmeCaFile: string | undefined;
  /** SLIPWAY_TLS_CERT_FILE / SLIPWAY_TLS_KEY_FILE: the operator's certificate, used for every host it covers. */
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
}

/** Let's Encrypt's production ACME v2 directory. */
export const LETS_ENCRYPT_DIRECTORY = 'https://acme-v02.api.letsencrypt.org/directory';

/** How long the server waits for a request, and how many connections it holds (docs/configuration.md). */
export interface EdgeLimits {
  /** SLIPWAY_HEADERS_TIMEOUT_SECONDS: time to receive a request's head. */
  readonly headersTimeoutMs: number;
  /** SLIPWAY_REQUEST_TIMEOUT_SECONDS: time to receive a whole ordinary request (head and body). */
  readonly requestTimeoutMs: number;
  /** SLIPWAY_UPLOAD_TIMEOUT_SECONDS: the same for uploads (multipart) and requests to apps. */
  readonly uploadTimeoutMs: number;
  /** SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS: a body that sends nothing for this long is closed. */
  readonly bodyIdleTimeoutMs: number;
  /** SLIPWAY_KEEP_ALIVE_TIMEOUT_SECONDS: an idle kept-alive connection is closed after this long. */
  readonly keepAliveTimeoutMs: number;
  /** SLIPWAY_MAX_CONNECTIONS: open connections in all (more are closed at once). */
  readonly maxConnections: number;
  /** SLIPWAY_MAX_CONNECTIONS_PER_ADDRESS: open connections from one client address. */
  readonly maxConnectionsPerAddress: number;
}

/** Client (CLI) settings from the environment. */
export interface ClientEnv {
  /** SLIPWAY_URL: server URL overriding the saved login. */
  readonly url: string | undefined;
  /** SLIPWAY_API_KEY: API key overriding the saved login. */
  readonly apiKey: string | undefined;
  /** Where the CLI keeps its credentials: $XDG_CONFIG_HOME/slipway (default ~/.config/slipway). */
  readonly configDir: string;
  /** SLIPWAY_BASE_IMAGE_*: what `slipway dockerfile` generates on (the server's defaults when absent). */
  readonly baseImages?: Config['baseImages'];
}

/** Raised when the environment holds a value Slipway cannot use; the message names the variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type Env = Readonly<Record<string, string | undefined>>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function text(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/** An image reference (`name[:tag]` or `name@digest`, optionally with a registry host): no spaces, no leading dash. */
function imageRef(env: Env, name: string, fallback: string): string {
  const value = text(env, name) ?? fallback;
  if (!/^[A-Za-z0-9][A-Za-z0-9._\-/:@]{0,254}$/.test(value)) throw new ConfigError(`${name} must be an image reference such as ${fallback}, got "${value}"`);
  return value;
}

/** An IPv4 CIDR from /8 to /26 whose host bits are zero. */
function subnetPool(env: Env, name: string, fallback: string): string {
  const value = text(env, name) ?? fallback;
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(value);
  const octets = match?.slice(1, 5).map(Number) ?? [];
  const prefix = Number(match?.[5]);
  const address = octets.reduce((sum, o) => sum * 256 + o, 0);
  const hostBits = 2 ** (32 - prefix);
  if (match === null || octets.some((o) => o > 255) || !(prefix >= 8 && prefix <= 26) || address % hostBits !== 0) {
    throw new ConfigError(`${name} must be an IPv4 range from /8 to /26 with its host bits zero, such as ${fallback}, got "${value}"`);
  }
  return value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

/** SLIPWAY_RUNTIME (decisions §16): `docker` (one engine) or `swarm`. */
function appRuntime(env: Env): 'docker' | 'swarm' {
  const raw = text(env, 'SLIPWAY_RUNTIME')?.toLowerCase();
  if (raw === undefined || raw === 'docker') return 'docker';
  // Without SLIPWAY_REGISTRY, Slipway runs its own registry (src/runtime/swarm/own-registry.ts).
  if (raw === 'swarm') return 'swarm';
  throw new ConfigError(`SLIPWAY_RUNTIME must be docker or swarm, got "${raw}"`);
}

/** SLIPWAY_REGISTRY and its credentials (both or neither). */
function registrySettings(env: Env): Config['registry'] {
  const address = text(env, 'SLIPWAY_REGISTRY');
  if (address === undefined) return undefined;
  // A registry host (a dot, a port or localhost makes it one, not a Docker Hub user), then an optional lowercase path.
  if (!/^[A-Za-z0-9.-]+(?::\d{1,5})?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$/.test(address) || !/[.:]|^localhost(?:[:/]|$)/.test(address)) {
    throw new ConfigError(`SLIPWAY_REGISTRY must be host[:port][/prefix] (a registry host with a dot or a port, a lowercase prefix), got "${address}"`);
  }
  const username = text(env, 'SLIPWAY_REGISTRY_USERNAME');
  const password = text(env, 'SLIPWAY_REGISTRY_PASSWORD');
  if ((username === undefined) !== (password === undefined)) throw new ConfigError('SLIPWAY_REGISTRY_USERNAME and SLIPWAY_REGISTRY_PASSWORD are set together or not at all');
  return username === undefined || password === undefined ? { address } : { address, username, password };
}

function oneOf<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
  const raw = text(env, name)?.toLowerCase();
  if (raw === undefined) return fallback;
  const found = values.find((v) => v === raw);
  if (found === undefined) throw new ConfigError(`${name} must be one of ${values.join(', ')}, got "${raw}"`);
  return found;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = text(env, name)?.toLowerCase();
  if (raw === undefined) return fallback;
  if (['true', '1', 'yes'].includes(raw)) return true;
  if (['false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/** SLIPWAY_SMTP_URL: an smtp:// or smtps:// URL with a host. */
function smtpUrl(env: Env): string | undefined {
  const raw = text(env, 'SLIPWAY_SMTP_URL');
  if (raw === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(raw);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'smtp:' && parsed.protocol !== 'smtps:') || parsed.hostname === '') {
    throw new ConfigError('SLIPWAY_SMTP_URL must be an smtp:// or smtps:// URL such as smtps://user:password@mail.example.com:465');
  }
  return raw;
}

/** Parses the server's environment once. Throws ConfigError with a clear message on a bad value. */
export function loadConfig(env: Env = process.env): Config {
  const port = integer(env, 'SLIPWAY_PORT', 8080, 0, 65535);
  const host = text(env, 'SLIPWAY_HOST') ?? '127.0.0.1';
  const domain = (text(env, 'SLIPWAY_DOMAIN') ?? 'localhost').toLowerCase().replace(/\.$/, '');
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(domain)) {
    throw new ConfigError(`SLIPWAY_DOMAIN must be a DNS name such as "apps.example.com", got "${domain}"`);
  }
  const databaseUrl = text(env, 'SLIPWAY_DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('SLIPWAY_DATABASE_URL must start with postgres:// (leave it unset for SQLite)');
  }
  const instanceUrl = text(env, 'SLIPWAY_INSTANCE_URL');
  if (instanceUrl !== undefined) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(instanceUrl);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.pathname !== '/' || parsed.search !== '') {
      throw new ConfigError(`SLIPWAY_INSTANCE_URL must be an http:// or https:// address without a path, got "${instanceUrl}"`);
    }
  }
  const adminEmail = text(env, 'SLIPWAY_ADMIN_EMAIL');
  const adminPassword = env['SLIPWAY_ADMIN_PASSWORD'];
  if ((adminEmail === undefined) !== (adminPassword === undefined || adminPassword === '')) {
    throw new ConfigError('SLIPWAY_ADMIN_EMAIL and SLIPWAY_ADMIN_PASSWORD must be set together');
  }
  if (adminEmail !== undefined && !/^[^\s@]+@[^\s@]+$/.test(adminEmail)) {
    throw new ConfigError(`SLIPWAY_ADMIN_EMAIL is not an e-mail address: "${adminEmail}"`);
  }
  if (adminPassword !== undefined && adminPassword !== '' && adminPassword.length < 8) {
    throw new ConfigError('SLIPWAY_ADMIN_PASSWORD must be at least 8 characters');
  }
  const logLevel = text(env, 'SLIPWAY_LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`SLIPWAY_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const publicRaw = text(env, 'SLIPWAY_PUBLIC_URL') ?? `http://${domain}:${port}`;
  let publicUrl: URL;
  try {
    publicUrl = new URL(publicRaw);
  } catch {
    throw new ConfigError(`SLIPWAY_PUBLIC_URL is not a URL: "${publicRaw}"`);
  }
  if (publicUrl.protocol !== 'http:' && publicUrl.protocol !== 'https:') {
    throw new ConfigError('SLIPWAY_PUBLIC_URL must be http:// or https://');
  }

  const maxMemoryMb = integer(env, 'SLIPWAY_MAX_MEMORY_MB', 2048, 16, 1_048_576);
  const maxCpus = cpus(env, 'SLIPWAY_MAX_CPUS', 2) / 1e9;
  const defaultMemoryBytes = integer(env, 'SLIPWAY_DEFAULT_MEMORY_MB', 512, 16, 1_048_576) * 1024 * 1024;
  const defaultNanoCpus = cpus(env, 'SLIPWAY_DEFAULT_CPUS', 1);
  if (defaultMemoryBytes > maxMemoryMb * 1024 * 1024) {
    throw new ConfigError(`SLIPWAY_DEFAULT_MEMORY_MB must not exceed SLIPWAY_MAX_MEMORY_MB (${maxMemoryMb})`);
  }
  if (defaultNanoCpus > Math.round(maxCpus * 1e9)) throw new ConfigError(`SLIPWAY_DEFAULT_CPUS must not exceed SLIPWAY_MAX_CPUS (${maxCpus})`);

  return {
    port,
    host,
    domain,
    dataDir: path.resolve(text(env, 'SLIPWAY_DATA_DIR') ?? './data'),
    databaseUrl,
    instanceUrl: instanceUrl?.replace(/\/$/, ''),
    adminEmail,
    adminPassword: adminEmail === undefined ? undefined : adminPassword,
    maxUploadBytes: integer(env, 'SLIPWAY_MAX_UPLOAD_BYTES', 536_870_912, 1, Number.MAX_SAFE_INTEGER),
    maxExpandedBytes: integer(env, 'SLIPWAY_MAX_EXPANDED_BYTES', 2 * 1024 ** 3, 1, Number.MAX_SAFE_INTEGER),
    maxArchiveEntries: integer(env, 'SLIPWAY_MAX_ARCHIVE_ENTRIES', 100_000, 1, 10_000_000),
    allowPrivateGit: bool(env, 'SLIPWAY_ALLOW_PRIVATE_GIT', false),
    insecureFastPasswordHashing: bool(env, 'SLIPWAY_INSECURE_FAST_PASSWORD_HASHING', false),
    allowPrivateTargets: bool(env, 'SLIPWAY_ALLOW_PRIVATE_TARGETS', false),
    pitrRoundSeconds: integer(env, 'SLIPWAY_PITR_ROUND_SECONDS', 20, 2, 50),
    instanceLostMs: integer(env, 'SLIPWAY_INSTANCE_LOST_SECONDS', 30, 3, 3600) * 1000,
    smtpUrl: smtpUrl(env),
    smtpFrom: text(env, 'SLIPWAY_SMTP_FROM') ?? `Slipway <slipway@${domain}>`,
    dockerHost: text(env, 'DOCKER_HOST'),
    sessionTtlMs: integer(env, 'SLIPWAY_SESSION_TTL_HOURS', 24 * 7, 1, 24 * 365) * 3_600_000,
    auditRetentionDays: integer(env, 'SLIPWAY_AUDIT_RETENTION_DAYS', 365, 1, 36_500),
    maxConcurrentBuilds: integer(env, 'SLIPWAY_MAX_CONCURRENT_BUILDS', 2, 1, 64),
    quotas: {
      deployments: integer(env, 'SLIPWAY_QUOTA_DEPLOYMENTS', 1000, 0, 1_000_000_000),
      concurrent_builds: integer(env, 'SLIPWAY_QUOTA_CONCURRENT_BUILDS', 20, 0, 1_000_000),
      upload_bytes: integer(env, 'SLIPWAY_QUOTA_UPLOAD_BYTES', 10 * 1024 ** 3, 0, Number.MAX_SAFE_INTEGER),
      api_keys: integer(env, 'SLIPWAY_QUOTA_API_KEYS', 1000, 0, 1_000_000_000),
      databases: integer(env, 'SLIPWAY_QUOTA_DATABASES', 20, 0, 1_000_000),
    },
    recoveryConcurrency: integer(env, 'SLIPWAY_RECOVERY_CONCURRENCY', 8, 1, 64),
    metricsIntervalMs: integer(env, 'SLIPWAY_METRICS_INTERVAL_SECONDS', 10, 1, 60) * 1000,
    buildTimeoutMs: integer(env, 'SLIPWAY_BUILD_TIMEOUT_SECONDS', 900, 1, 86_400) * 1000,
    startupTimeoutMs: integer(env, 'SLIPWAY_STARTUP_TIMEOUT_SECONDS', 60, 1, 3600) * 1000,
    keepImages: integer(env, 'SLIPWAY_KEEP_IMAGES', 5, 1, 100),
    buildLogMaxBytes: integer(env, 'SLIPWAY_BUILD_LOG_MAX_BYTES', 5 * 1024 * 1024, 4096, 1024 ** 3),
    defaultMemoryBytes,
    defaultNanoCpus,
    maxMemoryMb,
    maxCpus,
    appPidsLimit: integer(env, 'SLIPWAY_APP_PIDS_LIMIT', 512, 16, 1_000_000),
    buildNetwork: oneOf(env, 'SLIPWAY_BUILD_NETWORK', ['confined', 'none'] as const, 'confined'),
    buildMemoryBytes: integer(env, 'SLIPWAY_BUILD_MEMORY_MB', 2048, 64, 1_048_576) * 1024 * 1024,
    buildNanoCpus: cpus(env, 'SLIPWAY_BUILD_CPUS', 2),
    buildPidsLimit: integer(env, 'SLIPWAY_BUILD_PIDS_LIMIT', 1024, 16, 1_000_000),
    baseImages: baseImages(env),
    publicUrl,
    tunnelsPerKey: integer(env, 'SLIPWAY_TUNNELS_PER_KEY', 5, 1, 1000),
    streamsPerTunnel: integer(env, 'SLIPWAY_TUNNEL_STREAMS', 256, 1, 100_000),
    logLevel,
    edge: edgeLimits(env),
    https: httpsSettings(env),
    dataPlane: text(env, 'SLIPWAY_DATA_PLANE') === undefined ? undefined : oneOf(env, 'SLIPWAY_DATA_PLANE', ['haproxy', 'node'] as const, 'node'),
    haproxyBinary: absolutePath(env, 'SLIPWAY_HAPROXY_BIN'),
    haproxyThreads: integer(env, 'SLIPWAY_HAPROXY_THREADS', Math.max(1, Math.floor(os.availableParallelism() / 2)), 1, 64),
    runtime: appRuntime(env),
    databaseImages: {
      postgres: imageRef(env, 'SLIPWAY_DB_IMAGE_POSTGRES', 'postgres:16-alpine'),
      mysql: imageRef(env, 'SLIPWAY_DB_IMAGE_MYSQL', 'mariadb:11'),
      redis: imageRef(env, 'SLIPWAY_DB_IMAGE_REDIS', 'redis:7-alpine'),
    },
    databaseSubnetPool: subnetPool(env, 'SLIPWAY_DB_SUBNET_POOL', '10.213.0.0/16'),
    registry: registrySettings(env),
    registryPort: integer(env, 'SLIPWAY_REGISTRY_PORT', 5000, 1, 65535),
    swarmProbePath: absolutePath(env, 'SLIPWAY_SWARM_PROBE') ?? '/bin/busybox',
    ...swarmNodeEngines(env),
    swarmGuard: bool(env, 'SLIPWAY_SWARM_GUARD', true),
    selfBackup: selfBackupSettings(env),
    secretKey: secretKey(env, 'SLIPWAY_SECRET_KEY'),
    newSecretKey: secretKey(env, 'SLIPWAY_NEW_SECRET_KEY'),
  };
}

const NODE_ENGINES_FORM = 'a comma-separated list of <node>=<engine URL> (node: its address as swarm reports it, its hostname or its id; URL: unix:///path, tcp://host:port or https://host:port)';

/** SLIPWAY_SWARM_NODE_ENGINES and SLIPWAY_SWARM_NODE_TLS (its files read now: a missing one stops the start). */
function swarmNodeEngines(env: Env): Pick<Config, 'swarmNodeEngines' | 'swarmNodeTls'> {
  const dir = absolutePath(env, 'SLIPWAY_SWARM_NODE_TLS');
  const read = (dirPath: string, file: string): Buffer => {
    const filePath = path.join(dirPath, file);
    try {
      return fs.readFileSync(filePath);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new ConfigError(`SLIPWAY_SWARM_NODE_TLS: ${filePath} cannot be read (${code}); the directory holds ca.pem, cert.pem and key.pem`);
    }
  };
  const tls = dir === undefined ? undefined : { ca: read(dir, 'ca.pem'), cert: read(dir, 'cert.pem'), key: read(dir, 'key.pem') };
  const entries: Array<{ node: string; url: string }> = [];
  for (const item of (text(env, 'SLIPWAY_SWARM_NODE_ENGINES') ?? '').split(',').map((e) => e.trim()).filter((e) => e !== '')) {
    const eq = item.indexOf('=');
    const node = eq === -1 ? '' : item.slice(0, eq).trim();
    if (!/^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(node)) throw new ConfigError(`SLIPWAY_SWARM_NODE_ENGINES must be ${NODE_ENGINES_FORM}, got "${item}"`);
    if (entries.some((e) => e.node === node)) throw new ConfigError(`SLIPWAY_SWARM_NODE_ENGINES names the node "${node}" twice`);
    entries.push({ node, url: nodeEngineUrl(item.slice(eq + 1).trim(), tls !== undefined) });
  }
  return { swarmNodeEngines: entries, swarmNodeTls: tls };
}

/** One node engine's URL, checked (unix:// with an absolute path; tcp:// or https:// with a host and nothing else). */
function nodeEngineUrl(raw: string, tls: boolean): string {
  // A login in the URL is refused, and never repeated in the message.
  const shown = raw.replace(/\/\/[^/@]*@/, '//…@');
  const bad = (why: string): ConfigError => new ConfigError(`SLIPWAY_SWARM_NODE_ENGINES: "${shown}" ${why}; it must be ${NODE_ENGINES_FORM}`);
  if (raw.startsWith('unix://')) {
    if (!path.isAbsolute(raw.slice('unix://'.length))) throw bad('is not an absolute socket path');
    return raw;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw bad('is not a URL');
  }
  if (url.protocol !== 'tcp:' && url.protocol !== 'https:') throw bad('has an unknown scheme');
  if (url.hostname === '' || url.username !== '' || url.password !== '' || !['', '/'].includes(url.pathname) || url.search !== '' || url.hash !== '') {
    throw bad('must be a host and port only');
  }
  if (url.protocol === 'https:' && !tls) throw bad('is https:// and needs SLIPWAY_SWARM_NODE_TLS (a directory with ca.pem, cert.pem and key.pem)');
  return `${url.protocol}//${url.host}`;
}

/** SLIPWAY_SELF_BACKUP_SCHEDULE and SLIPWAY_SELF_BACKUP_DESTINATION: both or neither. */
function selfBackupSettings(env: Env): SelfBackupSettings | undefined {
  const schedule = text(env, 'SLIPWAY_SELF_BACKUP_SCHEDULE');
  const destination = text(env, 'SLIPWAY_SELF_BACKUP_DESTINATION');
  if (schedule === undefined && destination === undefined) return undefined;
  if (schedule === undefined || destination === undefined) throw new ConfigError('SLIPWAY_SELF_BACKUP_SCHEDULE and SLIPWAY_SELF_BACKUP_DESTINATION are set together');
  // The forms a job's schedule takes (contract §22): 5 or 6 fields, or @hourly, @daily, @weekly,
  // @monthly; read by croner as the scheduler will (src/operate/self-backup-schedule.ts).
  let cron: string;
  try {
    cron = JobSchedule.parse(schedule, 'UTC').expression;
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^schedule: /, '') : String(err);
    throw new ConfigError(`SLIPWAY_SELF_BACKUP_SCHEDULE must be a cron expression of five fields (or six, seconds first), such as "0 3 * * *", or @hourly, @daily, @weekly, @monthly, got "${schedule}" (${why})`);
  }
  if (path.isAbsolute(destination)) return { schedule: cron, directory: destination, keep: 14 };
  // A destination's id (a UUID) or its name (free text, as the API allows). A relative path is a
  // mistake more often than a name with "/" (such a destination is given by its id).
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(destination)) return { schedule: cron, destination: destination.toLowerCase(), keep: 14 };
  const name = objectName(destination);
  if (name === undefined || name.includes('/')) {
    throw new ConfigError(`SLIPWAY_SELF_BACKUP_DESTINATION must be a backup destination's id or name, or an absolute directory path, got "${destination}"`);
  }
  return { schedule: cron, destination: name, keep: 14 };
}

/** An absolute file path, if set. */
function absolutePath(env: Env, name: string): string | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  if (!path.isAbsolute(raw)) throw new ConfigError(`${name} must be an absolute path, got "${raw}"`);
  return raw;
}

/** A 32-byte key given in base64. */
function secretKey(env: Env, name: string): Buffer | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  const key = Buffer.from(raw, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(raw) || key.length !== 32) {
    throw new ConfigError(`${name} must be 32 random bytes in base64 (e.g. the output of \`openssl rand -base64 32\`)`);
  }
  return key;
}

function httpsSettings(env: Env): HttpsSettings | undefined {
  const certFile = text(env, 'SLIPWAY_TLS_CERT_FILE');
  const keyFile = text(env, 'SLIPWAY_TLS_KEY_FILE');
  if ((certFile === undefined) !== (keyFile === undefined)) throw new ConfigError('SLIPWAY_TLS_CERT_FILE and SLIPWAY_TLS_KEY_FILE must be set together');
  if (text(env, 'SLIPWAY_HTTPS_PORT') === undefined) return undefined;
  const acmeDirectoryUrl = text(env, 'SLIPWAY_ACME_DIRECTORY_URL') ?? LETS_ENCRYPT_DIRECTORY;
  let directory: URL;
  try {
    directory = new URL(acmeDirectoryUrl);
  } catch {
    throw new ConfigError(`SLIPWAY_ACME_DIRECTORY_URL is not a URL: "${acmeDirectoryUrl}"`);
  }
  if (directory.protocol !== 'https:') throw new ConfigError('SLIPWAY_ACME_DIRECTORY_URL must be an https:// URL');
  const acmeEmail = text(env, 'SLIPWAY_ACME_EMAIL');
  if (acmeEmail !== undefined && !/^[^\s@]+@[^\s@]+$/.test(acmeEmail)) throw new ConfigError(`SLIPWAY_ACME_EMAIL is not an e-mail address: "${acmeEmail}"`);
  const file = (name: string): string | undefined => {
    const value = text(env, name);
    return value === undefined ? undefined : path.resolve(value);
  };
  return {
    port: integer(env, 'SLIPWAY_HTTPS_PORT', 443, 0, 65535),
    acmeDirectoryUrl,
    acmeEmail,
    acmeCaFile: file('SLIPWAY_ACME_CA_FILE'),
    certFile: certFile === undefined ? undefined : path.resolve(certFile),
    keyFile: keyFile === undefined ? undefined : path.resolve(keyFile),
  };
}

function edgeLimits(env: Env): EdgeLimits {
  const seconds = (name: string, fallback: number, max: number): number => integer(env, name, fallback, 1, max) * 1000;
  const limits: EdgeLimits = {
    headersTimeoutMs: seconds('SLIPWAY_HEADERS_TIMEOUT_SECONDS', 20, 3600),
    requestTimeoutMs: seconds('SLIPWAY_REQUEST_TIMEOUT_SECONDS', 60, 86_400),
    uploadTimeoutMs: seconds('SLIPWAY_UPLOAD_TIMEOUT_SECONDS', 3600, 86_400),
    bodyIdleTimeoutMs: seconds('SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS', 30, 3600),
    keepAliveTimeoutMs: seconds('SLIPWAY_KEEP_ALIVE_TIMEOUT_SECONDS', 65, 3600),
    maxConnections: integer(env, 'SLIPWAY_MAX_CONNECTIONS', 10_000, 1, 1_000_000),
    maxConnectionsPerAddress: integer(env, 'SLIPWAY_MAX_CONNECTIONS_PER_ADDRESS', 512, 1, 1_000_000),
  };
  if (limits.headersTimeoutMs > limits.requestTimeoutMs || limits.requestTimeoutMs > limits.uploadTimeoutMs) {
    throw new ConfigError('SLIPWAY_HEADERS_TIMEOUT_SECONDS ≤ SLIPWAY_REQUEST_TIMEOUT_SECONDS ≤ SLIPWAY_UPLOAD_TIMEOUT_SECONDS must hold');
  }
  return limits;
}

/** A CPU count (decimal, 0.01 to 1024, as deployments accept) in nano-CPUs, the unit Docker takes. */
function cpus(env: Env, name: string, fallback: number): number {
  const raw = text(env, name);
  if (raw === undefined) return Math.round(fallback * 1e9);
  const value = Number(raw);
  if (!/^\d+(\.\d+)?$/.test(raw) || !(value >= 0.01 && value <= 1024)) {
    throw new ConfigError(`${name} must be a positive number of CPUs from 0.01 to 1024, got "${raw}"`);
  }
  return Math.round(value * 1e9);
}

/** SLIPWAY_BASE_IMAGE_*: the base images of generated Dockerfiles (decisions §24). */
function baseImages(env: Env): Config['baseImages'] {
  return {
    node: imageRef(env, 'SLIPWAY_BASE_IMAGE_NODE', 'node:20-bookworm-slim'),
    python: imageRef(env, 'SLIPWAY_BASE_IMAGE_PYTHON', 'python:3.11-slim-bookworm'),
    go: imageRef(env, 'SLIPWAY_BASE_IMAGE_GO', 'golang:1.22-bookworm'),
    run: imageRef(env, 'SLIPWAY_BASE_IMAGE_RUN', 'debian:bookworm-slim'),
    static: imageRef(env, 'SLIPWAY_BASE_IMAGE_STATIC', 'busybox:1.36'),
  };
}

/** Parses the CLI's environment. */
export function loadClientEnv(env: Env = process.env): ClientEnv {
  const xdg = text(env, 'XDG_CONFIG_HOME');
  const home = text(env, 'HOME') ?? os.homedir();
  return {
    url: text(env, 'SLIPWAY_URL'),
    apiKey: text(env, 'SLIPWAY_API_KEY'),
    configDir: path.join(xdg ?? path.join(home, '.config'), 'slipway'),
    baseImages: baseImages(env),
  };
}

/** The URL an app with `subdomain` is served at. */
export function appUrl(config: Pick<Config, 'publicUrl' | 'domain'>, subdomain: string): string {
  const url = new URL(config.publicUrl.href);
  url.hostname = `${subdomain}.${config.domain}`;
  url.pathname = '/';
  return url.href;
}

const URL_PLACEHOLDER = 'slipway0subdomain0placeholder';

/**
 * `appUrl` for many subdomains at once (a list of deployments): the public URL is parsed once, and
 * each DNS label is put in its place. Anything that is not a plain label takes the full path.
 */
export function appUrls(config: Pick<Config, 'publicUrl' | 'domain'>): (subdomain: string) => string {
  const parts = appUrl(config, URL_PLACEHOLDER).split(URL_PLACEHOLDER);
  const [before, after] = parts;
  if (parts.length !== 2 || before === undefined || after === undefined) return (subdomain) => appUrl(config, subdomain);
  return (subdomain) => (/^[a-z0-9-]+$/.test(subdomain) ? before + subdomain + after : appUrl(config, subdomain));
}

/** Client-side or one-off settings that do not belong in a server's settings file. */
const NOT_SERVER_SETTINGS = new Set(['SLIPWAY_URL', 'SLIPWAY_API_KEY', 'SLIPWAY_NEW_SECRET_KEY']);

/**
 * The server settings set in the environment (SLIPWAY_* and DOCKER_HOST, empty ones left out),
 * with SLIPWAY_DATA_DIR made absolute: what `slipway server install` writes to the settings file.
 */
export function serverSettings(env: Env = process.env): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value.trim() === '') continue;
    if ((name.startsWith('SLIPWAY_') && !name.startsWith('SLIPWAY_TEST_') && !NOT_SERVER_SETTINGS.has(name)) || name === 'DOCKER_HOST') settings[name] = value;
  }
  settings['SLIPWAY_DATA_DIR'] = path.resolve(text(env, 'SLIPWAY_DATA_DIR') ?? './data');
  return settings;
}
