// Databases, compose sets and jobs under swarm on the real test cluster (decisions §19, §21, §22): a database pinned to the manager's node with its volume, reached by name over the overlay and through `db connect`; a compose set health-gated service by service; a job as a one-off service.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runDbConnect } from '../../src/cli/db-connect.js';
import { appRequest, eventually, tarGzOf, tempDir, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, writeBusyboxApp } from '../helpers/busybox-image.js';
import { STAND_IN_IMAGES, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { busyboxOnManager, clusterScript, copyImageToNode, nodeDocker, type ClusterLayout, type ClusterScript } from '../helpers/swarm-cluster.js';

const REDIS = STAND_IN_IMAGES.SLIPWAY_DB_IMAGE_REDIS ?? '';

/** The api service's health check: its page answers. */
const API_HEALTHY = ['CMD', 'wget', '-q', '-O', '/dev/null', 'http://127.0.0.1:8081/'];

/** A compose source: `web` built from ./web (two replicas, serving `body`), `api` from the busybox image (two replicas, `api one`, with `check`). */
async function setArchive(body: string, check: readonly string[]): Promise<Buffer> {
  const dir = tempDir('swarm-set');
  try {
    await writeBusyboxApp(path.join(dir, 'web'), { body });
    await fsp.writeFile(path.join(dir, 'compose.yaml'), `
services:
  web:
    build: ./web
    expose: ["8080"]
    deploy:
      replicas: 2
  api:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "mkdir -p /w && echo api one > /w/index.html && echo api starts && exec httpd -f -p 8081 -h /w"]
    deploy:
      replicas: 2
    healthcheck:
      test: ${JSON.stringify(check)}
      interval: 1s
      timeout: 3s
      retries: 2
`);
    return await tarGzOf(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** Writes `text` to a loopback port and reads until `until` matches or 20 s pass. */
function talk(port: number, text: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(got);
    };
    const timer = setTimeout(finish, 20_000);
    socket.on('connect', () => socket.write(text));
    socket.on('data', (chunk: Buffer) => {
      got += chunk.toString();
      if (until.test(got)) finish();
    });
    socket.on('close', finish);
    socket.on('error', reject);
  });
}

describe('stateful workloads under swarm', () => {
  let cluster: ClusterScript;
  let layout: ClusterLayout | undefined;
  let ts: TestServer | undefined;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let dbId = '';
  let password = '';

  /** An API call; a keep-alive connection the server closed while this process was busy in a docker CLI call is dialled again. */
  const api = async (...args: Parameters<TestServer['request']>): ReturnType<TestServer['request']> => {
    assert.ok(ts !== undefined);
    try {
      return await ts.request(...args);
    } catch (err) {
      if (!(err instanceof TypeError)) throw err;
      return ts.request(...args);
    }
  };
  let appId = '';
  let subdomain = '';
  const manager = (): NonNullable<ClusterLayout['nodes'][number]> => {
    const node = layout?.nodes[0];
    assert.ok(node !== undefined);
    return node;
  };
  /** The swarm services of the database (by its label), as the manager lists them. */
  const dbServices = (): Array<{ Spec: { Mode: { Replicated: { Replicas: number } }; TaskTemplate: { Placement: { Constraints: string[] } } } }> =>
    JSON.parse(`[${nodeDocker(manager(), ['service', 'ls', '-q', '--filter', `label=dev.slipway.service=${dbId}`]).trim().split('\n').filter((l) => l !== '').map((sid) => nodeDocker(manager(), ['service', 'inspect', sid]).trim().slice(1, -1)).join(',')}]`);
  /** Runs a command through `slipway db connect`'s listener: the answer to `text`. */
  const throughConnect = async (text: string, until: RegExp): Promise<string> => {
    assert.ok(ts !== undefined);
    const controller = new AbortController();
    const problems: string[] = [];
    let port = 0;
    let listening!: () => void;
    const up = new Promise<void>((resolve) => (listening = resolve));
    const done = runDbConnect({ serverUrl: ts.url, bearer: user.apiKey, databaseId: dbId, port: 0, signal: controller.signal, onListening: (p) => { port = p; listening(); }, onProblem: (m) => problems.push(m) });
    await up;
    try {
      const answer = await talk(port, text, until);
      assert.match(answer, until, problems.join('; '));
      return answer;
    } finally {
      controller.abort();
      await done;
    }
  };

  before(async () => {
    cluster = await clusterScript();
    layout = await cluster.up(process.pid);
    const [, , server] = await Promise.all([
      // The busybox base apps build FROM, copied from this host's engine.
      busyboxOnManager(layout),
      // The database's image is taken from the manager's engine (its task is pinned there): no registry, no pull.
      copyImageToNode(manager(), REDIS),
      startTestServer({
        ...STAND_IN_IMAGES,
        DOCKER_HOST: `unix://${manager().socket}`,
        SLIPWAY_RUNTIME: 'swarm',
        SLIPWAY_REGISTRY: layout.registry,
        SLIPWAY_BUILD_NETWORK: 'none',
        SLIPWAY_STARTUP_TIMEOUT_SECONDS: '15',
      }),
    ]);
    ts = server;
    user = await ts.newUser('swarm-db');
  });
  after(async () => {
    await ts?.close();
    if (layout !== undefined) await cluster.down(layout);
  });

  test('a database is one swarm task pinned to the manager, its volume there; db connect reaches it', async () => {
    assert.ok(ts !== undefined);
    const created = await api('POST', '/api/v1/databases', { token: user.token, body: { name: 'cache', engine: 'redis' } });
    assert.equal(created.status, 201, created.text);
    dbId = created.json.id as string;
    const running = await waitForStatus(ts, user.token, dbId);
    assert.equal(running.status, 'running', running.error);
    const services = dbServices();
    assert.equal(services.length, 1);
    const managerId = nodeDocker(manager(), ['info', '--format', '{{.Swarm.NodeID}}']).trim();
    assert.deepEqual(services[0]?.Spec.TaskTemplate.Placement.Constraints, [`node.id==${managerId}`]);
    assert.equal(services[0]?.Spec.Mode.Replicated.Replicas, 1);
    assert.match(nodeDocker(manager(), ['volume', 'ls', '-q', '--filter', `label=dev.slipway.service=${dbId}`]), /svc/);
    password = (await api('GET', `/api/v1/databases/${dbId}/credentials`, { token: user.token })).json.password as string;
    const answer = await throughConnect(`AUTH default ${password}\r\nSET greeting hello\r\nGET greeting\r\n`, /hello\r\n$/);
    assert.equal(answer, '+OK\r\n+OK\r\n$5\r\nhello\r\n');
  });

  test('a compose set: each service a swarm service with its replicas on the overlay; the web one served; a linked database and the other service reached by name from a worker', async () => {
    assert.ok(ts !== undefined && layout !== undefined);
    subdomain = `swarm-set-${process.pid}`;
    const app = await api('POST', '/api/v1/deployments', { token: user.token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: 'compose.yaml' } });
    assert.equal(app.status, 201, app.text);
    appId = app.json.id as string;
    const linked = await api('POST', `/api/v1/deployments/${appId}/databases`, { token: user.token, body: { database_id: dbId, env: 'REDIS_URL' } });
    assert.equal(linked.status, 201, linked.text);
    assert.equal((await upload(ts, user.token, appId, await setArchive('set one\n', API_HEALTHY))).status, 200);
    const deployed = await api('POST', `/api/v1/deployments/${appId}/deploy?wait=true`, { token: user.token });
    assert.equal(deployed.status, 200, deployed.text);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'set one\n');
    const replicasOf = (label: string): string => nodeDocker(manager(), ['service', 'ls', '--format', '{{.Replicas}}', '--filter', label]).trim();
    assert.equal(replicasOf(`label=dev.slipway.deployment=${appId}`), '2/2');
    assert.equal(replicasOf(`label=dev.slipway.set-deployment=${appId}`), '2/2');
    // A web replica on a worker (two replicas spread over the nodes: at least one is not on the manager).
    const worker = layout.nodes.slice(1).find((n) => nodeDocker(n, ['ps', '-q', '--filter', `label=dev.slipway.deployment=${appId}`]).trim() !== '');
    assert.ok(worker !== undefined, 'a web replica should run on a worker');
    const container = nodeDocker(worker, ['ps', '-q', '--filter', `label=dev.slipway.deployment=${appId}`]).trim().split('\n')[0] ?? '';
    assert.match(nodeDocker(worker, ['exec', container, 'sh', '-c', 'echo "$REDIS_URL"']).trim(), /^redis:\/\/default:.+@cache:6379\/0$/);
    const answer = await eventually(async () => {
      const out = nodeDocker(worker, ['exec', container, 'sh', '-c', 'printf "AUTH default %s\\r\\nGET greeting\\r\\n" "$0" | timeout 5 nc -w 2 cache 6379 || true', password]);
      return out.includes('hello') ? out : undefined;
    }, 20_000, 'the app to reach the database by its name');
    assert.equal(answer, '+OK\r\n$5\r\nhello\r\n');
    assert.equal(nodeDocker(worker, ['exec', container, 'wget', '-q', '-O', '-', 'http://api:8081/']).trim(), 'api one');
    const logs = await eventually(async () => {
      const text = (await api('GET', `/api/v1/deployments/${appId}/logs?tail=50`, { token: user.token })).text;
      return /^\[api\] api starts$/m.test(text) ? text : undefined;
    }, 20_000, 'the api service\'s lines in the merged logs');
    assert.match(logs, /^\[web\] listening on 8080$/m);
  });

  test("a job's run is a one-off swarm service of the live release: its output and exit code are recorded, and it is removed", async () => {
    const job = await api('POST', `/api/v1/deployments/${appId}/jobs`, { token: user.token, body: { name: 'report', schedule: '@daily', command: ['sh', '-c', 'echo "job ran on $(hostname)"; exit 3'] } });
    assert.equal(job.status, 201, job.text);
    const jobId = job.json.id as string;
    const started = await api('POST', `/api/v1/deployments/${appId}/jobs/${jobId}/runs`, { token: user.token });
    assert.equal(started.status, 202, started.text);
    const run = await eventually(async () => {
      const runs = await api('GET', `/api/v1/deployments/${appId}/jobs/${jobId}/runs`, { token: user.token });
      const first = (runs.json as Array<{ id: string; status: string; exit_code: number | null }>)[0];
      return first !== undefined && first.status !== 'running' ? first : undefined;
    }, 60_000, 'the run to end');
    assert.equal(run.status, 'failed');
    assert.equal(run.exit_code, 3);
    const logs = await api('GET', `/api/v1/deployments/${appId}/jobs/${jobId}/runs/${run.id}/logs`, { token: user.token });
    assert.match(logs.text, /job ran on /);
    assert.equal(nodeDocker(manager(), ['service', 'ls', '-q', '--filter', 'label=dev.slipway.job-run']).trim(), '');
  });

  test('a set whose other service is unhealthy fails naming it, and the previous set keeps serving; unlinking takes every service off the network', async () => {
    assert.ok(ts !== undefined);
    assert.equal((await upload(ts, user.token, appId, await setArchive('set two\n', ['CMD', 'false']))).status, 200);
    const failed = await api('POST', `/api/v1/deployments/${appId}/deploy?wait=true`, { token: user.token });
    assert.notEqual(failed.status, 200, failed.text);
    assert.match(String(failed.json.message), /service "api"/);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'set one\n');
    const companion = nodeDocker(manager(), ['service', 'ls', '-q', '--filter', `label=dev.slipway.set-deployment=${appId}`]).trim();
    // Rolled back to the previous set's spec (its health check), its replicas serving.
    assert.match(nodeDocker(manager(), ['service', 'inspect', '--format', '{{json .Spec.TaskTemplate.ContainerSpec.Healthcheck.Test}}', companion]), /wget/);
    assert.equal(nodeDocker(manager(), ['service', 'ls', '--format', '{{.Replicas}}', '--filter', `label=dev.slipway.set-deployment=${appId}`]).trim(), '2/2');
    assert.equal((await api('DELETE', `/api/v1/deployments/${appId}/databases/${dbId}`, { token: user.token })).status, 204);
    for (const label of [`dev.slipway.deployment=${appId}`, `dev.slipway.set-deployment=${appId}`]) {
      const service = nodeDocker(manager(), ['service', 'ls', '-q', '--filter', `label=${label}`]).trim();
      const networks = nodeDocker(manager(), ['service', 'inspect', '--format', '{{json .Spec.TaskTemplate.Networks}}', service]);
      assert.equal((JSON.parse(networks) as unknown[]).length, 1, networks);
    }
  });

  test('stop scales the task to none, start brings it back on the same node with its data', async () => {
    assert.ok(ts !== undefined);
    const stopped = await api('POST', `/api/v1/databases/${dbId}/stop`, { token: user.token });
    assert.equal(stopped.status, 200, stopped.text);
    assert.equal(stopped.json.status, 'stopped');
    assert.equal(dbServices()[0]?.Spec.Mode.Replicated.Replicas, 0);
    const started = await api('POST', `/api/v1/databases/${dbId}/start`, { token: user.token });
    assert.equal(started.status, 200, started.text);
    assert.equal(started.json.status, 'running', started.json.error);
    const answer = await throughConnect(`AUTH default ${password}\r\nGET greeting\r\n`, /hello\r\n$/);
    assert.equal(answer, '+OK\r\n$5\r\nhello\r\n');
  });

  test('delete removes the service, its network and its volume', async () => {
    assert.ok(ts !== undefined);
    const deleted = await api('DELETE', `/api/v1/databases/${dbId}`, { token: user.token });
    assert.equal(deleted.status, 204, deleted.text);
    assert.equal(dbServices().length, 0);
    assert.equal(nodeDocker(manager(), ['volume', 'ls', '-q', '--filter', `label=dev.slipway.service=${dbId}`]).trim(), '');
    // Swarm lets go of a removed overlay network on the node a moment after the manager removed it.
    await eventually(async () => (nodeDocker(manager(), ['network', 'ls', '-q', '--filter', `label=dev.slipway.service=${dbId}`]).trim() === '' ? true : undefined), 20_000, 'the network to go');
  });
});
