// Test helpers for managed databases: the stand-in images' settings, waiting for a status, the database's container, a client command run inside it.
import Dockerode from 'dockerode';
import { LABEL_SERVICE } from '../../src/runtime/service.js';
import { LABEL_DEPLOYMENT } from '../../src/runtime/engine.js';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { eventually } from './apps.js';
import { execIn } from './engine-exec.js';
import type { TestServer } from './server.js';

/** The stand-in images (`npm run stand-in-images`): tests never pull. */
export const STAND_IN_IMAGES: Record<string, string> = {
  SLIPWAY_DB_IMAGE_POSTGRES: 'slipway-stand-in/postgres:15',
  SLIPWAY_DB_IMAGE_MYSQL: 'slipway-stand-in/mariadb:10.11',
  SLIPWAY_DB_IMAGE_REDIS: 'slipway-stand-in/redis:7',
};

export const docker = new Dockerode();

/** Waits until the database's status is one of `statuses` (within 3 minutes: a first start initializes its data); resolves with the database. */
// The body is a JSON shape the test inspects.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function waitForStatus(s: Pick<TestServer, 'request'>, token: string, id: string, statuses: readonly string[] = ['running', 'failed']): Promise<any> {
  return eventually(async () => {
    const res = await s.request('GET', `/api/v1/databases/${id}`, { token });
    return statuses.includes(res.json?.status) ? res.json : undefined;
  }, 180_000, `database ${id} to be ${statuses.join(' or ')}`);
}

/** The database's container (its engine inspect), if one exists. */
export async function databaseContainer(id: string): Promise<Dockerode.ContainerInspectInfo | undefined> {
  const [found] = await docker.listContainers({ all: true, filters: { label: [`${LABEL_SERVICE}=${id}`] } });
  return found === undefined ? undefined : docker.getContainer(found.Id).inspect();
}

/** The running containers of a deployment. */
export async function appContainers(deploymentId: string): Promise<Dockerode.ContainerInfo[]> {
  return docker.listContainers({ filters: { label: [`${LABEL_DEPLOYMENT}=${deploymentId}`] } });
}

const engine = createDockerEngine();

/** Runs `argv` inside a container without a TTY (clients then never prompt nor page), `env` added; resolves with its output, failing on a non-zero exit. */
export async function runIn(containerId: string, argv: readonly string[], env: Record<string, string> = {}): Promise<string> {
  const result = await engine.execInContainer!(containerId, argv, { env, timeoutMs: 30_000 });
  if (result.exitCode !== 0) throw new Error(`${argv[0]} exited with ${result.exitCode}: ${result.output}`);
  return result.output;
}

/** Runs a SQL statement with psql inside the postgres database's container, as its user; resolves with psql's output. */
export function psql(containerId: string, credentials: { username: string; password: string; database: string }, statement: string): Promise<string> {
  return runIn(containerId, ['psql', '-h', '127.0.0.1', '-U', credentials.username, '-d', credentials.database, '-Atc', statement], { PGPASSWORD: credentials.password });
}

/** Whether a TCP connection from inside `containerId` to host:port opens within 2 s (busybox nc). */
export async function canConnect(containerId: string, host: string, port: number): Promise<boolean> {
  // Debian's busybox nc has no -z: with stdin at its end it connects, and exits 0 only if it could.
  const out = await execIn(docker, containerId, ['/bin/sh', '-c', 'if timeout 5 nc -w 2 "$0" "$1" </dev/null >/dev/null 2>&1; then echo OPEN; else echo CLOSED; fi', host, String(port)], 30_000);
  if (!/OPEN|CLOSED/.test(out)) throw new Error(`unexpected nc output: ${out}`);
  return out.includes('OPEN');
}
