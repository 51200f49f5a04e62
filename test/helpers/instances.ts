// Several real `slipway server` processes on one PostgreSQL database (decisions §15), for test/ha and bench/ha.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './net.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, spawnServerProcess, testEnv, type HttpResult, type RequestOptions, type ServerProcess } from './server.js';

/** One instance: its process, data directory and public port. */
export interface Instance {
  readonly name: string;
  readonly dataDir: string;
  readonly port: number;
  readonly url: string;
  process: ServerProcess | undefined;
  request(method: string, urlPath: string, options?: RequestOptions): Promise<HttpResult>;
}

/** A cluster of instances sharing `databaseUrl` and one installation key. */
export interface Cluster {
  readonly instances: Instance[];
  readonly adminToken: string;
  /** The installation key every instance shares (base64), for tests that sign inter-instance calls themselves. */
  readonly secretKey: string;
  /** Starts (or starts again) an instance on its own data directory and port. */
  start(instance: Instance): Promise<void>;
  /** kill -9 of the instance: its supervisor and its server process, nothing shut down cleanly. */
  kill(instance: Instance): Promise<void>;
  close(): Promise<void>;
}

/** The pid of the server process (the supervisor's worker) that holds an instance's data directory. */
function workerPid(dataDir: string): number | undefined {
  try {
    return (JSON.parse(fs.readFileSync(path.join(dataDir, 'server.lock.holder'), 'utf8')) as { pid: number }).pid;
  } catch {
    return undefined;
  }
}

/** Starts `count` instances from the build on `databaseUrl`, one after the other (the first leads). */
export async function startCluster(
  databaseUrl: string,
  count: number,
  extraEnv: Record<string, string> = {},
  /** Settings of one instance only, by index (e.g. another data plane). */
  instanceEnv: ReadonlyArray<Record<string, string> | undefined> = [],
  /** Each instance's public (plain HTTP) port by index, e.g. one a test ACME CA validates on; a free port when missing. */
  ports: ReadonlyArray<number | undefined> = [],
): Promise<Cluster> {
  const secretKey = crypto.randomBytes(32).toString('base64');
  const instances: Instance[] = [];
  for (let i = 0; i < count; i++) {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-ha-${i}-`));
    const port = ports[i] ?? (await freePort());
    const url = `http://127.0.0.1:${port}`;
    instances.push({ name: `instance ${i}`, dataDir, port, url, process: undefined, request: (method, urlPath, options) => request(url, method, urlPath, options) });
  }
  const start = async (instance: Instance): Promise<void> => {
    instance.process = await spawnServerProcess(
      testEnv(instance.dataDir, {
        SLIPWAY_PORT: String(instance.port),
        SLIPWAY_DATABASE_URL: databaseUrl,
        SLIPWAY_SECRET_KEY: secretKey,
        SLIPWAY_INSTANCE_URL: instance.url,
        SLIPWAY_DATA_PLANE: 'node',
        ...extraEnv,
        ...instanceEnv[instances.indexOf(instance)],
      }),
    );
  };
  const kill = async (instance: Instance): Promise<void> => {
    const worker = workerPid(instance.dataDir);
    await instance.process?.kill('SIGKILL');
    if (worker !== undefined) {
      try {
        process.kill(worker, 'SIGKILL');
      } catch {
        // already gone (it ends when its supervisor does)
      }
    }
    instance.process = undefined;
  };
  const started: Instance[] = [];
  try {
    for (const instance of instances) {
      await start(instance);
      started.push(instance);
    }
  } catch (err) {
    for (const instance of started) await kill(instance);
    throw err;
  }
  const adminToken = await loginAs(instances[0]?.url ?? '', ADMIN_EMAIL, ADMIN_PASSWORD);
  return {
    instances,
    adminToken,
    secretKey,
    start,
    kill,
    close: async () => {
      for (const instance of instances) {
        await instance.process?.kill('SIGTERM');
        instance.process = undefined;
        fs.rmSync(instance.dataDir, { recursive: true, force: true });
      }
    },
  };
}
