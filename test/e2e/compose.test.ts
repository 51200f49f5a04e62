// End to end on the real engine: a compose deployment (web + worker + redis) released as one set: served, health-gated, rolled back, refused, deleted.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LABEL_DEPLOYMENT, LABEL_MANAGED } from '../../src/runtime/engine.js';
import { appRequest, deployAndWait, eventually, tarGzOf, tempDir, testEngine, uniqueSubdomain, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { cli } from '../helpers/cli.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { pullRequestBody, pullRequestHeaders } from '../helpers/pull-requests.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The stack's compose file: web built from the source, a worker and redis taken from the engine. */
function stackCompose(webCheck: readonly string[]): string {
  return `
x-slipway:
  web: web
services:
  web:
    build: ./web
    expose: ["8080"]
    environment:
      CACHE_HOST: cache
    depends_on:
      cache:
        condition: service_healthy
    healthcheck:
      test: ${JSON.stringify(webCheck)}
      interval: 1s
      timeout: 3s
      retries: 2
  worker:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "while true; do echo tick $$GREETING; sleep 1; done"]
    depends_on: [cache]
  cache:
    image: slipway-stand-in/redis:7
    networks: [default]
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      interval: 1s
      retries: 20
`;
}

/** The web's health check reaches redis by its service name (`$$`: not interpolated from the file): healthy proves the set's network resolves it. */
const REACHES_CACHE = ['CMD-SHELL', 'printf "PING\\r\\n" | nc -w 2 "$$CACHE_HOST" 6379 | grep -q PONG'];

/** A source archive: the compose file and the web service's context. */
async function stackArchive(compose: string, body: string): Promise<Buffer> {
  await ensureBusyboxImage(testEngine());
  const dir = tempDir('compose');
  try {
    await writeBusyboxApp(path.join(dir, 'web'), { body });
    await fsp.writeFile(path.join(dir, 'compose.yaml'), compose);
    return await tarGzOf(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

describe('compose deployments on the engine', () => {
  let ts: TestServer;
  let token: string;
  let apiKey: string;
  let id = '';
  let subdomain = '';
  const engine = testEngine();
  const containers = () => engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: id });

  before(async () => {
    // Three services' engine health checks on a shared, loaded machine: more time than one app's start.
    ts = await startTestServer({ SLIPWAY_STARTUP_TIMEOUT_SECONDS: '90' });
    ({ token, apiKey } = await ts.newUser('compose'));
  });
  after(async () => {
    if (id !== '') await ts.request('DELETE', `/api/v1/deployments/${id}`, { token }).catch(() => undefined);
    await ts.close();
  });

  const logOf = async (buildId: string): Promise<string> => (await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token })).text;
  /** Deploys and waits: the build's outcome (a failed build answers 500 with its message), its id and log. */
  const deploy = async (): Promise<{ status: string; message: string; buildId: string; log: string }> => {
    const res = await deployAndWait(ts, token, id);
    const newest = (await ts.request('GET', `/api/v1/deployments/${id}/builds?limit=1`, { token })).json[0];
    return { status: newest.status, message: res.status === 200 ? '' : String(res.json.message), buildId: newest.id, log: await logOf(newest.id) };
  };

  test('compose_path: exclusive with dockerfile_path, stored and shown', async () => {
    subdomain = uniqueSubdomain('compose');
    const both = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: 'compose.yaml', dockerfile_path: 'Dockerfile' } });
    assert.equal(both.status, 400, both.text);
    assert.match(both.json.message, /compose_path and dockerfile_path are exclusive/);
    assert.equal((await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: '../x.yaml' } })).status, 400);
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', compose_path: './compose.yaml' } });
    assert.equal(created.status, 201, created.text);
    id = created.json.id;
    assert.equal((await ts.request('GET', `/api/v1/deployments/${id}`, { token })).json.compose_path, 'compose.yaml');
    // PATCH: another compose file, a Dockerfile instead (clears it), then back; a path out of the source is refused.
    const patch = async (body: Record<string, unknown>) => ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body });
    assert.equal((await patch({ compose_path: 'deploy/compose.prod.yaml' })).json.compose_path, 'deploy/compose.prod.yaml');
    assert.equal((await patch({ dockerfile_path: 'web/Dockerfile' })).json.compose_path, null);
    const outside = await patch({ compose_path: '../compose.yaml' });
    assert.equal(outside.status, 400, outside.text);
    assert.equal((await patch({ compose_path: 'compose.yaml' })).json.compose_path, 'compose.yaml');
    // The deployment's variables reach every service, not only the web one (the worker prints it).
    assert.equal((await ts.request('PATCH', `/api/v1/deployments/${id}/env`, { token, body: { vars: { GREETING: 'hello' } } })).status, 200);
  });

  test('the set is served at the subdomain, its other services unreachable from outside; logs and metrics by service', async () => {
    assert.equal((await upload(ts, token, id, await stackArchive(stackCompose(REACHES_CACHE), 'set one\n'))).status, 200);
    const built = await deploy();
    const log = built.log;
    assert.equal(built.status, 'succeeded', `${built.message}\n${log}`);
    assert.match(log, /==> compose file compose\.yaml: 3 services \(cache, web, worker\); web: "web" on port 8080/);
    assert.match(log, /warning: service "cache": "networks" is ignored \(line \d+\)/);
    assert.match(log, /==> service "web": building web\/Dockerfile/);
    assert.match(log, /==> service "cache": image slipway-stand-in\/redis:7/);
    assert.match(log, /all 3 services are up and healthy/);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'set one\n');

    const running = await containers();
    assert.equal(running.length, 3);
    // Only the web container is published (on loopback); the worker and redis have no host port at all.
    assert.deepEqual(running.filter((c) => c.hostPort !== null).map((c) => c.upstream?.host), ['127.0.0.1']);

    const logs = await eventually(async () => {
      const text = (await ts.request('GET', `/api/v1/deployments/${id}/logs?tail=200`, { token })).text;
      return /^\[worker\] tick hello$/m.test(text) ? text : undefined;
    }, 20_000, "worker lines in the merged logs, with the deployment's variable");
    assert.match(logs, /^\[web\] /m);
    const onlyWorker = (await ts.request('GET', `/api/v1/deployments/${id}/logs?tail=20&service=worker`, { token })).text;
    assert.ok(onlyWorker.trim().split('\n').every((line) => line.startsWith('[worker] ')), onlyWorker);

    const metrics = await ts.request('GET', `/api/v1/deployments/${id}/metrics`, { token });
    assert.equal(metrics.status, 200, metrics.text);
    assert.deepEqual(metrics.json.services.map((s: { service: string }) => s.service).sort(), ['cache', 'web', 'worker']);
    assert.equal(metrics.json.memory_bytes, metrics.json.services.reduce((t: number, s: { memory_bytes: number }) => t + s.memory_bytes, 0));
  });

  test('a redeploy whose web never becomes healthy fails naming it and leaves the old set serving; rollback re-releases a whole set', async () => {
    const first = (await ts.request('GET', `/api/v1/deployments/${id}`, { token })).json.live_build_id as string;
    const before = (await containers()).map((c) => c.id).sort();
    assert.equal((await upload(ts, token, id, await stackArchive(stackCompose(['CMD', 'false']), 'set broken\n'))).status, 200);
    const failed = await deploy();
    assert.equal(failed.status, 'failed');
    assert.match(failed.message, /service "web" is unhealthy: its health check failed/);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'set one\n');
    assert.deepEqual((await containers()).map((c) => c.id).sort(), before, 'the new set was removed, the old one untouched');

    assert.equal((await upload(ts, token, id, await stackArchive(stackCompose(REACHES_CACHE), 'set two\n'))).status, 200);
    const second = await deploy();
    assert.equal(second.status, 'succeeded', `${second.message}\n${second.log}`);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'set two\n');

    const rolled = await ts.request('POST', `/api/v1/deployments/${id}/rollback`, { token, body: { build_id: first } });
    assert.ok(rolled.status < 300, rolled.text);
    await eventually(async () => ((await appRequest(ts.port, subdomain)).body === 'set one\n' ? true : undefined), 30_000, 'the first set served again');
    // The replaced set is drained and removed: three containers again, all of the first build.
    await eventually(async () => {
      const list = await containers();
      return list.length === 3 && list.every((c) => c.labels['dev.slipway.build'] === first) ? true : undefined;
    }, 60_000, 'the second set removed');
  });

  test('stop stops every service of the set; restart brings the whole set back', async () => {
    const stopped = await ts.request('POST', `/api/v1/deployments/${id}/stop`, { token });
    assert.equal(stopped.status, 200, stopped.text);
    const left = await containers();
    assert.equal(left.length, 3);
    assert.deepEqual(left.filter((c) => c.running).map((c) => c.name), [], 'no service left running');
    assert.equal((await appRequest(ts.port, subdomain)).status, 503);
    const restarted = await ts.request('POST', `/api/v1/deployments/${id}/restart`, { token });
    assert.equal(restarted.status, 200, restarted.text);
    await eventually(async () => ((await appRequest(ts.port, subdomain)).body === 'set one\n' ? true : undefined), 60_000, 'the set served again');
    const services = (await ts.request('GET', `/api/v1/deployments/${id}/services`, { token })).json as Array<{ name: string; running: number }>;
    assert.deepEqual(services.map((s) => [s.name, s.running]), [['cache', 1], ['web', 1], ['worker', 1]]);
  });

  test('privileges and host mounts fail the build before anything is built, each named (a published port does not)', async () => {
    const compose = `
services:
  web:
    build: ./web
    ports: ["8080:8080"]
    privileged: true
  agent:
    image: ${BUSYBOX_IMAGE}
    volumes: ["/var/run/docker.sock:/var/run/docker.sock"]
`;
    assert.equal((await upload(ts, token, id, await stackArchive(compose, 'refused\n'))).status, 200);
    const refused = await deploy();
    assert.equal(refused.status, 'failed');
    assert.doesNotMatch(refused.message, /key ports/, '"8080:8080" serves the container port; the host part is left out with a warning');
    assert.match(refused.message, /service "web", key privileged \(line 6\)/);
    assert.match(refused.message, /service "agent", key volumes \(line 9\): "\/var\/run\/docker\.sock:\/var\/run\/docker\.sock" mounts a host path or socket/);
    assert.doesNotMatch(refused.log, /Step 1\//, 'nothing was built');
    assert.equal((await appRequest(ts.port, subdomain)).body, 'set one\n');
  });

  test('a ?service= naming no service of the live set is refused with the services listed; an image service refused by the image policy is named', async () => {
    const unknown = await ts.request('GET', `/api/v1/deployments/${id}/logs?tail=5&service=wokrer`, { token });
    assert.equal(unknown.status, 400, unknown.text);
    assert.equal(unknown.json.message, 'service="wokrer": no such service in the live release; its services: cache, web, worker');
    // An image built by Slipway for a deployment (here this set's own web image) is refused as in a Dockerfile's FROM, and the failure names the service.
    const webImage = ((await ts.request('GET', `/api/v1/deployments/${id}/services`, { token })).json as Array<{ name: string; image: string }>).find((s) => s.name === 'web')?.image;
    assert.ok(webImage !== undefined);
    const compose = `
x-slipway: {web: web}
services:
  copy:
    image: ${webImage}
  web:
    build: ./web
    expose: ["8080"]
`;
    assert.equal((await upload(ts, token, id, await stackArchive(compose, 'refused\n'))).status, 200);
    const refused = await deploy();
    assert.equal(refused.status, 'failed');
    assert.match(refused.message, /^image build failed: service "copy": refused: line 1: FROM \S+ refused: it names an image built by Slipway for a deployment$/);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'set one\n');
  });

  test('the CLI: `slipway deploy DIR --compose FILE` creates a compose app from a folder; `logs --service` keeps one service, a wrong name lists them', async () => {
    await ensureBusyboxImage(engine);
    const home = tempDir('compose-cli');
    const dir = path.join(home, 'shop');
    try {
      await fsp.mkdir(dir);
      // Both services from the engine's image (nothing to build): the case is about the CLI.
      await fsp.writeFile(path.join(dir, 'compose.yaml'), `x-slipway: {web: web}\nservices:\n  web:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sh", "-c", "mkdir -p /w && echo from the cli > /w/index.html && exec httpd -f -p 8080 -h /w"]\n    expose: ["8080"]\n  worker:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sh", "-c", "while true; do echo busy; sleep 1; done"]\n`);
      const run = (args: string[]) => cli(args, { home, env: { SLIPWAY_URL: ts.url, SLIPWAY_API_KEY: apiKey } });
      assert.match((await run(['deploy', dir, '--compose', '../compose.yaml'])).stderr, /--compose must be a path inside the folder, got "\.\.\/compose\.yaml"/);
      const shopSubdomain = uniqueSubdomain('shop');
      const deployed = await run(['deploy', dir, '--compose', 'compose.yaml', '--subdomain', shopSubdomain]);
      assert.equal(deployed.code, 0, deployed.stderr);
      assert.equal((await appRequest(ts.port, shopSubdomain)).body, 'from the cli\n');
      assert.match((await run(['status', shopSubdomain])).stdout, /^compose file: +compose\.yaml$/m);
      const worker = await eventually(async () => {
        const res = await run(['logs', shopSubdomain, '--service', 'worker', '--tail', '3']);
        return res.code === 0 && /^\[worker\] busy$/m.test(res.stdout) ? res.stdout : undefined;
      }, 20_000, "the worker's lines");
      assert.ok(worker.trim().split('\n').every((line) => line === '[worker] busy'), worker);
      const wrong = await run(['logs', shopSubdomain, '--service', 'wroker']);
      assert.equal(wrong.code, 1);
      assert.match(wrong.stderr, /service="wroker": no such service in the live release; its services: web, worker/);
      assert.equal((await run(['rm', shopSubdomain, '--yes'])).code, 0);
    } finally {
      await fsp.rm(home, { recursive: true, force: true });
    }
  });

  test("a pull request's preview of a compose app is the whole set, served at <subdomain>-pr-<n>, its logs by service; closing removes every container", async () => {
    let git: GitServer | undefined;
    let previewApp = '';
    try {
      git = await startGitServer();
      // Both services from the engine's image: the case is about the preview being a set, not about builds.
      const files = (text: string): Record<string, string> => ({
        'compose.yaml': `x-slipway: {web: web}\nservices:\n  web:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sh", "-c", "mkdir -p /w && echo ${text} > /w/index.html && exec httpd -f -p 8080 -h /w"]\n    expose: ["8080"]\n    depends_on: [side]\n  side:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sh", "-c", "while true; do echo side of ${text}; sleep 1; done"]\n`,
      });
      const repo = `compose-pr-${process.pid}`;
      const { url } = await git.createRepo(repo, files('main'));
      const prSubdomain = uniqueSubdomain('cpr');
      const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: repo, subdomain: prSubdomain, repo_url: url, branch: 'main', previews: true, compose_path: 'compose.yaml' } });
      assert.equal(created.status, 201, created.text);
      previewApp = created.json.id;
      const hook = await ts.request('POST', `/api/v1/deployments/${previewApp}/webhook`, { token });
      assert.equal(hook.status, 201, hook.text);
      await git.commit(repo, files('pull-one'), { branch: 'feature' });
      const sha = await git.setRef(repo, 'refs/pull/1/head');
      const deliver = (action: 'opened' | 'closed') => {
        const body = pullRequestBody('github', { action, number: 1, headSha: sha, headBranch: 'feature' });
        return ts.request('POST', `/api/v1/hooks/${previewApp}`, { raw: body, headers: pullRequestHeaders('github', hook.json.secret, body) });
      };
      const opened = await deliver('opened');
      assert.equal(opened.status, 202, opened.text);
      const previewId = opened.json.deployment_id as string;
      await eventually(async () => {
        const res = await ts.request('GET', `/api/v1/deployments/${previewApp}/previews/1`, { token });
        if (res.json.status === 'failed') throw new Error(res.text);
        return res.json.status === 'running' ? true : undefined;
      }, 120_000, 'the preview running');
      assert.equal((await appRequest(ts.port, `${prSubdomain}-pr-1`)).body, 'pull-one\n');
      const set = await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: previewId });
      assert.equal(set.filter((c) => c.running).length, 2, 'web and side');
      const side = await eventually(async () => {
        const text = (await ts.request('GET', `/api/v1/deployments/${previewApp}/previews/1/logs?tail=3&service=side`, { token })).text;
        return /^\[side\] side of pull-one$/m.test(text) ? text : undefined;
      }, 20_000, "the side service's lines");
      assert.ok(side.trim().split('\n').every((line) => line.startsWith('[side] ')), side);
      assert.equal((await deliver('closed')).status, 200);
      assert.equal((await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_DEPLOYMENT]: previewId })).length, 0, 'every container of the set removed');
    } finally {
      if (previewApp !== '') await ts.request('DELETE', `/api/v1/deployments/${previewApp}`, { token }).catch(() => undefined);
      await git?.close();
    }
  });

  test('delete removes every container of the set', async () => {
    assert.equal((await ts.request('DELETE', `/api/v1/deployments/${id}`, { token })).status, 204);
    await eventually(async () => ((await containers()).length === 0 ? true : undefined), 30_000, 'every container removed');
    id = '';
  });
});
