// Test factory: a real Slipway server on a loopback port with a temp data dir, plus small HTTP helpers.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { loadConfig, type Config } from '../../src/config.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import { startServer, type RunningServer, type StartOptions } from '../../src/main.js';
import Database from 'better-sqlite3';
import crypto from 'node:crypto';
import pg from 'pg';
import Dockerode from 'dockerode';
import { imageRepositoryPrefix } from '../../src/deploy/images.js';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { LABEL_SERVICE_OF } from '../../src/runtime/service.js';

export const ADMIN_EMAIL = 'admin@test.local';
export const ADMIN_PASSWORD = 'admin-password-1';

/** Root of the compiled project (dist/..), to find bin/slipway.js. */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

type FetchBody = NonNullable<NonNullable<Parameters<typeof fetch>[1]>['body']>;

export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;
  // Parsed JSON body (tests inspect arbitrary shapes).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export interface RequestOptions {
  token?: string | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  /** Raw body (sent as-is). */
  raw?: FetchBody;
}

/** Sends one HTTP request to `baseUrl + path` and reads the whole answer. */
export async function request(baseUrl: string, method: string, urlPath: string, options: RequestOptions = {}): Promise<HttpResult> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  let body: FetchBody | undefined = options.raw;
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(options.body);
  }
  const res = await fetch(baseUrl + urlPath, { method, headers, ...(body === undefined ? {} : { body }), signal: AbortSignal.timeout(120_000) });
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export interface TestServer {
  readonly server: RunningServer;
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  readonly config: Config;
  readonly adminToken: string;
  request(method: string, urlPath: string, options?: RequestOptions): Promise<HttpResult>;
  /** Creates a user (through the admin) and returns a session token and an API key for it. */
  newUser(label?: string): Promise<{ email: string; password: string; token: string; apiKey: string; userId: string }>;
  close(): Promise<void>;
}

let userCounter = 0;

/** Test environment for a server: loopback, port 0, temp data dir, known admin. */
export function testEnv(dataDir: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    SLIPWAY_PORT: '0',
    SLIPWAY_HOST: '127.0.0.1',
    SLIPWAY_DOMAIN: 'localhost',
    SLIPWAY_DATA_DIR: dataDir,
    SLIPWAY_ADMIN_EMAIL: ADMIN_EMAIL,
    SLIPWAY_ADMIN_PASSWORD: ADMIN_PASSWORD,
    SLIPWAY_ALLOW_PRIVATE_GIT: 'true',
    // Hundreds of throwaway accounts: cheap hashes (test/api/auth checks the standard cost on its own server).
    SLIPWAY_INSECURE_FAST_PASSWORD_HASHING: 'true',
    SLIPWAY_LOG_LEVEL: 'silent',
    SLIPWAY_STARTUP_TIMEOUT_SECONDS: '20',
    // The routing suites run against both planes (test/helpers/planes.ts); the rest use Node's,
    // unless SLIPWAY_TEST_DATA_PLANE=haproxy runs them behind HAProxy too.
    SLIPWAY_DATA_PLANE: process.env['SLIPWAY_TEST_DATA_PLANE'] === 'haproxy' ? 'haproxy' : 'node',
    ...overrides,
  };
}

export async function loginAs(baseUrl: string, email: string, password: string): Promise<string> {
  const res = await request(baseUrl, 'POST', '/api/v1/auth/login', { body: { email, password } });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${res.text}`);
  return res.json.token as string;
}

/**
 * With SLIPWAY_TEST_DATABASE_URL (a PostgreSQL role that may create databases), each test server
 * gets a database of its own there instead of SQLite: `npm test` runs the dialect-neutral suites
 * once per dialect. Resolves with the server's URL and a function that drops the database.
 */
export async function testDatabase(): Promise<{ url: string; drop: () => Promise<void> } | undefined> {
  const admin = process.env['SLIPWAY_TEST_DATABASE_URL'];
  if (admin === undefined || admin === '') return undefined;
  const name = `slipway_t_${crypto.randomBytes(6).toString('hex')}`;
  const run = async (statement: string): Promise<void> => {
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await run(`CREATE DATABASE ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  const drop = async (): Promise<void> => {
    // An autovacuum worker in the database can make the forced drop fail (42501 without the
    // pg_signal_backend role, 55006 while it ends): it is tried again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (attempt >= 5 || (code !== '42501' && code !== '55006')) throw err;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  };
  return { url: url.href, drop };
}

/**
 * A database of its own for a store-level test: SQLite in a temp dir, or PostgreSQL with
 * SLIPWAY_TEST_DATABASE_URL (see testDatabase), with a user row for each of `userIds`. `close`
 * destroys the connection and drops what was made.
 */
export async function openTestDatabase(label: string, userIds: readonly string[]): Promise<{ db: Db; close: () => Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-${label}-`));
  const pgDatabase = await testDatabase();
  const db = await openDatabase({ file: path.join(dir, 'slipway.db'), url: pgDatabase?.url });
  for (const id of userIds) {
    await db.insertInto('users').values({ id, email: `${id}@example.test`, password_hash: 'x', is_admin: 0, created_at: 't', updated_at: 't' }).execute();
  }
  return {
    db,
    close: async () => {
      await db.destroy();
      await pgDatabase?.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The default log of a test server: silent, except an API answer of 500 (a bug, whatever the test),
 * whose error and stack go to stderr so a failing run shows why.
 */
function reportInternalErrors(level: string, message: string, detail?: object): void {
  if (level === 'error' && message.startsWith('internal error')) process.stderr.write(`[test server] ${message} ${inspect(detail, { depth: 4 })}\n`);
}

/** Starts a server in this process. */
export async function startTestServer(overrides: Record<string, string> = {}, dataDir?: string, options: Pick<StartOptions, 'buildSlots' | 'log' | 'now'> = {}): Promise<TestServer> {
  const dir = dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-test-'));
  const database = overrides['SLIPWAY_DATABASE_URL'] === undefined ? await testDatabase() : undefined;
  if (database !== undefined) overrides = { ...overrides, SLIPWAY_DATABASE_URL: database.url };
  const config = loadConfig(testEnv(dir, overrides));
  const server = await startServer(config, { ...options, log: options.log ?? reportInternalErrors, gitEnv: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: dir } });
  const adminToken = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  const req = (method: string, urlPath: string, options?: RequestOptions): Promise<HttpResult> => request(server.url, method, urlPath, options);
  return {
    server,
    url: server.url,
    port: server.port,
    dataDir: dir,
    config,
    adminToken,
    request: req,
    async newUser(label = 'user') {
      userCounter += 1;
      const email = `${label}-${process.pid}-${userCounter}@test.local`;
      const password = `password-${userCounter}-xyz`;
      const created = await req('POST', '/api/v1/users', { token: adminToken, body: { email, password } });
      if (created.status !== 201) throw new Error(`create user failed: ${created.status} ${created.text}`);
      const token = await loginAs(server.url, email, password);
      const key = await req('POST', '/api/v1/api-keys', { token, body: { name: 'test' } });
      return { email, password, token, apiKey: key.json.key as string, userId: created.json.id as string };
    },
    async close() {
      await server.close();
      await removeInstanceObjects(server.instanceId);
      await database?.drop();
    },
  };
}

/** After a cluster of instances on `database` (PostgreSQL): its installation's engine objects removed, then the database dropped. */
export async function dropClusterDatabase(database: { url: string; drop: () => Promise<void> }): Promise<void> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  let installation: string | undefined;
  try {
    installation = (await client.query<{ id: string }>('select id from instance').catch(() => ({ rows: [] as Array<{ id: string }> }))).rows[0]?.id;
  } finally {
    await client.end();
  }
  if (installation !== undefined) await removeInstanceObjects(installation);
  await database.drop();
}

/**
 * Removes every container and image the installation in `dataDir` left on the engine, so a test
 * run leaves the engine as it found it.
 */
export async function removeEngineObjects(dataDir: string): Promise<void> {
  const file = path.join(dataDir, 'slipway.db');
  if (!fs.existsSync(file)) return;
  const sqlite = new Database(file, { readonly: true });
  let instance: string | undefined;
  try {
    instance = (sqlite.prepare('select id from instance').get() as { id: string } | undefined)?.id;
  } finally {
    sqlite.close();
  }
  if (instance !== undefined) await removeInstanceObjects(instance);
}

/** Removes every container, volume, image and network of one installation from the engine. */
export async function removeInstanceObjects(instance: string): Promise<void> {
  const engine = createDockerEngine();
  for (const container of await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance })) {
    await patiently(() => engine.removeContainer(container.id));
  }
  for (const volume of await engine.listVolumes({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance })) {
    await patiently(() => engine.removeVolume(volume.name));
  }
  const prefix = imageRepositoryPrefix(instance);
  for (const image of await engine.listImages({})) {
    for (const tag of image.tags) if (tag.startsWith(prefix)) await patiently(() => engine.removeImage(tag));
  }
  for (const network of await engine.listNetworks({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instance })) {
    await removeNetworkWhenFree(engine, network.id);
  }
  // Managed databases' services (src/runtime/service.ts) carry labels of their own.
  const services = { [LABEL_SERVICE_OF]: instance };
  for (const container of await engine.listContainers(services)) await patiently(() => engine.removeContainer(container.id));
  for (const network of await engine.listNetworks(services)) await removeNetworkWhenFree(engine, network.id);
  for (const volume of await engine.listVolumes(services)) await patiently(() => engine.removeVolume(volume.name));
}

/**
 * Runs a removal again when the engine did not finish it within the call's time limit: on a loaded
 * host deleting an image's layers can take longer, and the engine goes on with it meanwhile (the
 * next attempt finds it done). Three attempts; other errors at once.
 */
async function patiently(remove: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await remove();
      return;
    } catch (err) {
      if (attempt >= 3 || (err as Error).name !== 'TimeoutError') throw err;
    }
  }
}

/**
 * A cancelled build's intermediate container (the classic builder's, which carries no label of ours)
 * can stay attached to the installation's build network for a while after the server closed. The
 * network is this installation's alone, so whatever is still attached to it is ours to remove.
 */
async function removeNetworkWhenFree(engine: ReturnType<typeof createDockerEngine>, id: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  const docker = new Dockerode();
  for (let attempt = 0; ; attempt++) {
    try {
      await engine.removeNetwork(id);
      return;
    } catch (err) {
      if (!/active endpoints/i.test(String(err))) throw err;
      if (Date.now() > deadline) {
        // Docker 20.10 can keep an endpoint of a container already gone (libnetwork's stale endpoint):
        // nothing is attached that a test could remove, so the leftover network is reported, not failed on.
        const info = (await docker.getNetwork(id).inspect().catch(() => ({}))) as { Name?: string; Containers?: Record<string, unknown> };
        if (Object.keys(info.Containers ?? {}).length > 0) throw err;
        process.stderr.write(`[test cleanup] network ${info.Name ?? id} kept a stale endpoint (no container attached); left in place\n`);
        return;
      }
    }
    if (attempt >= 3) {
      const info = (await docker.getNetwork(id).inspect()) as { Containers?: Record<string, unknown> };
      for (const container of Object.keys(info.Containers ?? {})) {
        await docker.getContainer(container).remove({ force: true }).catch(() => undefined);
        // An endpoint whose container is gone goes only with a forced disconnect.
        await docker.getNetwork(id).disconnect({ Container: container, Force: true }).catch(() => undefined);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** A server running as a child process (`slipway server`), for crash and restart tests. */
export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  readonly port: number;
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export async function spawnServerProcess(env: Record<string, string>, nodeArgs: readonly string[] = [], options: { netns?: string; root?: string } = {}): Promise<ServerProcess> {
  // The same V8 flag `npm start` runs the server with (a small young generation: less memory).
  // `root`: another build of Slipway (the upgrade test runs the previous release).
  const argv = [process.execPath, '--max-semi-space-size=2', ...nodeArgs, path.join(options.root ?? PROJECT_ROOT, 'bin', 'slipway.js'), 'server'];
  // In a network namespace (the swarm test cluster's manager): nsenter execs the server in place, so the pid is the server's.
  const [command, ...args] = options.netns === undefined ? argv : ['nsenter', `--net=/run/netns/${options.netns}`, '--', ...argv];
  const child = spawn(command ?? process.execPath, args, {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: os.tmpdir(), ...env, SLIPWAY_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const match = /listening on (http:\/\/[^\s]+)/.exec(output);
    if (match?.[1] !== undefined) {
      const url = match[1];
      return {
        child,
        url,
        port: Number(new URL(url).port),
        output: () => output,
        kill: (signal = 'SIGTERM') =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill(signal);
          }),
      };
    }
    if (child.exitCode !== null) throw new Error(`server exited early: ${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`server did not start: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
