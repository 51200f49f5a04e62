// Three real instances on one PostgreSQL and one engine (decisions §15): shared state, routes on every edge, a leader killed.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait, eventually, testEngine } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startCluster, type Cluster, type Instance } from '../helpers/instances.js';
import { dropClusterDatabase, testDatabase } from '../helpers/server.js';
import { docker } from '../helpers/databases.js';
import { execIn } from '../helpers/engine-exec.js';

interface Listed {
  id: string;
  url: string | null;
  state: string;
  leader: boolean;
}

describe('several instances on one PostgreSQL', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  let cluster: Cluster;
  let token: string;
  let app: { id: string; subdomain: string };
  const edges = (): Instance[] => cluster.instances.filter((i) => i.process !== undefined);
  const listInstances = async (via: Instance): Promise<Listed[]> => {
    const res = await via.request('GET', '/api/v1/instances', { token: cluster.adminToken });
    assert.equal(res.status, 200, res.text);
    return res.json as Listed[];
  };
  /** Waits until every running instance's edge answers the app with `status`. */
  const everyEdgeAnswers = async (status: number, what: string): Promise<void> => {
    for (const instance of edges()) {
      await eventually(async () => ((await appRequest(instance.port, app.subdomain)).status === status ? true : undefined), 60_000, `${what} on ${instance.name}`);
    }
  };

  let git: GitServer;
  before(async () => {
    await ensureBusyboxImage(testEngine());
    git = await startGitServer();
    // An instance silent 10 s is lost (30 s by default: test/api/config): the build of the one killed below is taken over sooner.
    cluster = await startCluster(database.url, 3, { SLIPWAY_INSTANCE_LOST_SECONDS: '10' });
  });
  after(async () => {
    await cluster?.close();
    await git?.close();
    await dropClusterDatabase(database);
  });

  test('every instance is listed live with its URL, one of them the leader', async () => {
    const [a, b] = cluster.instances as [Instance, Instance, Instance];
    const listed = await listInstances(b);
    assert.equal(listed.length, 3);
    assert.deepEqual(listed.map((i) => i.state), ['live', 'live', 'live']);
    assert.deepEqual(listed.map((i) => i.url).sort(), cluster.instances.map((i) => i.url).sort());
    assert.equal(listed.filter((i) => i.leader).length, 1);
    assert.equal(listed.find((i) => i.leader)?.url, a.url, 'the first started leads');
  });

  test('sessions, API keys and users are shared: made on one instance, accepted by the others', async () => {
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    const email = `ha-${process.pid}@example.test`;
    const created = await a.request('POST', '/api/v1/users', { token: cluster.adminToken, body: { email, password: 'ha-password-1' } });
    assert.equal(created.status, 201, created.text);
    const login = await b.request('POST', '/api/v1/auth/login', { body: { email, password: 'ha-password-1' } });
    assert.equal(login.status, 200, login.text);
    token = login.json.token as string;
    assert.equal((await c.request('GET', '/api/v1/deployments', { token })).status, 200);
    const key = await c.request('POST', '/api/v1/api-keys', { token, body: { name: 'ha' } });
    assert.equal(key.status, 201, key.text);
    assert.equal((await a.request('GET', '/api/v1/deployments', { token: key.json.key as string })).status, 200);
    // A logout on one instance ends the session on every instance.
    const other = (await a.request('POST', '/api/v1/auth/login', { body: { email, password: 'ha-password-1' } })).json.token as string;
    assert.equal((await b.request('POST', '/api/v1/auth/logout', { token: other })).status, 204);
    assert.equal((await c.request('GET', '/api/v1/deployments', { token: other })).status, 401);
  });

  test('wrong logins count across instances: 10 in total, then every instance answers 429', async () => {
    const [a] = cluster.instances as [Instance];
    const email = `ha-limit-${process.pid}@example.test`;
    assert.equal((await a.request('POST', '/api/v1/users', { token: cluster.adminToken, body: { email, password: 'ha-password-1' } })).status, 201);
    for (let i = 0; i < 10; i++) {
      const via = cluster.instances[i % 3] as Instance;
      const res = await via.request('POST', '/api/v1/auth/login', { body: { email, password: `wrong-${i}` } });
      assert.equal(res.status, 401, `attempt ${i} on ${via.name}: ${res.text}`);
    }
    // (A wrong password while polling: a right one let through early would end the count.)
    for (const instance of cluster.instances) {
      await eventually(async () => {
        const res = await instance.request('POST', '/api/v1/auth/login', { body: { email, password: 'still-wrong' } });
        return res.status === 429 ? true : undefined;
      }, 30_000, `429 on ${instance.name}`);
      const right = await instance.request('POST', '/api/v1/auth/login', { body: { email, password: 'ha-password-1' } });
      assert.equal(right.status, 429, `the right password on ${instance.name} while limited: ${right.text}`);
    }
  });

  test('an upload to one instance is deployed from another and served by every edge; a stop on another reaches every edge', async () => {
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    const built = await busyboxArchive({ body: 'served everywhere\n' });
    app = await createArchiveApp(a, token, built.archive);
    // Received by A, built by C: no shared filesystem, the upload is read back from the database.
    const deployed = await deployAndWait(c, token, app.id);
    assert.equal(deployed.status, 200, deployed.text);
    await everyEdgeAnswers(200, 'the new app');
    for (const instance of edges()) assert.equal((await appRequest(instance.port, app.subdomain)).body, 'served everywhere\n');
    assert.equal((await b.request('POST', `/api/v1/deployments/${app.id}/stop`, { token })).status, 200);
    await everyEdgeAnswers(503, 'the stopped app');
    assert.equal((await b.request('POST', `/api/v1/deployments/${app.id}/restart`, { token })).status, 200);
    await everyEdgeAnswers(200, 'the restarted app');
  });

  test('a build running on one instance is cancelled from another', async () => {
    const [a, b] = cluster.instances as [Instance, Instance, Instance];
    const dockerfile = [`FROM ${BUSYBOX_IMAGE}`, 'RUN echo slow step && sleep 60', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /"]', ''].join('\n');
    const repo = await git.createRepo(`ha-cancel-${process.pid}`, { Dockerfile: dockerfile });
    const subdomain = `ha-cancel-${process.pid}`;
    const created = await b.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, repo_url: repo.url, branch: 'main' } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const started = await b.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(started.status, 202, started.text);
    const buildId = started.json.id as string;
    await eventually(async () => {
      const log = await b.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token });
      return /slow step/.test(log.text) ? true : undefined;
    }, 120_000, 'the build to reach its slow step on instance 1');
    const cancelled = await a.request('POST', `/api/v1/deployments/${id}/cancel`, { token });
    assert.equal(cancelled.status, 200, cancelled.text);
    const build = await a.request('GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token });
    assert.equal(build.json.status, 'cancelled', build.text);
    const log = await b.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token });
    assert.match(log.text, /cancelled: .*cancelled by the user/);
    // Nothing left to cancel, on any instance.
    assert.equal((await b.request('POST', `/api/v1/deployments/${id}/cancel`, { token })).status, 409);
  });

  test('kill -9 of the instance running a build: the leader builds it again from the start (same build, its log says so), apps keep answering', async () => {
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    // A step of its own each run: a cached layer (an earlier run on the same engine) would finish the build before the kill.
    // It waits (60 s at most) for a file the test puts in its container once the instance running it is killed.
    const marker = crypto.randomUUID();
    const wait = 'i=0; while [ ! -e /release ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done';
    const dockerfile = [`FROM ${BUSYBOX_IMAGE}`, `RUN echo slow step ${marker} && ${wait}`, 'COPY site/index.html /www/index.html', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''].join('\n');
    const repo = await git.createRepo(`ha-${process.pid}`, { Dockerfile: dockerfile, 'site/index.html': 'taken over\n' });
    const subdomain = `ha-takeover-${process.pid}`;
    const created = await c.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, repo_url: repo.url, branch: 'main' } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const started = await c.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(started.status, 202, started.text);
    const buildId = started.json.id as string;
    await eventually(async () => {
      const log = await c.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token });
      return /slow step/.test(log.text) ? true : undefined;
    }, 120_000, 'the build to reach its slow step on instance 2');
    await cluster.kill(c);
    // The first app keeps answering on the other edges meanwhile.
    for (const instance of [a, b]) assert.equal((await appRequest(instance.port, app.subdomain)).status, 200);
    const build = await eventually(async () => {
      // The step's container of the build taken over (the builder's, on the shared engine), whenever it is there.
      for (const step of (await docker.listContainers()).filter((ct) => ct.Command.includes(marker))) {
        await execIn(docker, step.Id, ['touch', '/release']).catch(() => undefined);
      }
      const res = await a.request('GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token });
      return res.json?.status === 'succeeded' || res.json?.status === 'failed' ? res.json : undefined;
    }, 180_000, 'the build taken over to end');
    assert.equal(build.status, 'succeeded', JSON.stringify(build));
    const builds = await a.request('GET', `/api/v1/deployments/${id}/builds`, { token });
    const listed = (builds.json.items ?? builds.json) as Array<{ id: string }>;
    assert.deepEqual(listed.map((x) => x.id), [buildId], 'the same build record, no new one');
    const log = await a.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token });
    assert.match(log.text, /was lost; instance \S+ builds it again from the start/);
    for (const instance of [a, b]) {
      await eventually(async () => ((await appRequest(instance.port, subdomain)).body === 'taken over\n' ? true : undefined), 60_000, `the app on ${instance.name}`);
    }
    await cluster.start(c);
  });

  test('kill -9 of the leader: another instance leads, apps keep answering; started again, it catches up on routes it missed', async () => {
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    await cluster.kill(a);
    // Apps are served by the other edges meanwhile.
    for (const instance of [b, c]) assert.equal((await appRequest(instance.port, app.subdomain)).status, 200);
    const leader = await eventually(async () => {
      const listed = await listInstances(b);
      const leaders = listed.filter((i) => i.leader);
      return leaders.length === 1 && leaders[0]?.url !== a.url ? leaders[0] : undefined;
    }, 60_000, 'another leader');
    assert.ok(leader.url === b.url || leader.url === c.url);
    // A change while the killed instance is down …
    assert.equal((await c.request('POST', `/api/v1/deployments/${app.id}/stop`, { token })).status, 200);
    await everyEdgeAnswers(503, 'the app stopped while one instance is down');
    // … is what it serves once started again.
    await cluster.start(a);
    assert.equal((await appRequest(a.port, app.subdomain)).status, 503);
    const listed = await listInstances(a);
    assert.deepEqual(listed.map((i) => i.state), ['live', 'live', 'live']);
    assert.equal(listed.filter((i) => i.leader).length, 1);
  });

  test('8 concurrent operations on one deployment, split across instances, end in one consistent state', async () => {
    const ops = ['restart', 'stop', 'restart', 'deploy', 'stop', 'restart', 'deploy', 'restart'];
    const answers = await Promise.all(
      ops.map((op, i) => {
        const via = cluster.instances[i % 3] as Instance;
        return via.request('POST', `/api/v1/deployments/${app.id}/${op}${op === 'deploy' ? '?wait=true' : ''}`, { token });
      }),
    );
    for (const [i, res] of answers.entries()) assert.ok([200, 202, 409].includes(res.status), `${ops[i]}: ${res.status} ${res.text}`);
    // Settled: no build in flight any more.
    const [a] = cluster.instances as [Instance];
    const settled = await eventually(async () => {
      const dep = await a.request('GET', `/api/v1/deployments/${app.id}`, { token });
      return dep.json.status === 'building' ? undefined : dep.json;
    }, 120_000, 'the deployment to settle');
    const expected = settled.status === 'running' ? 200 : 503;
    await everyEdgeAnswers(expected, `the settled state (${String(settled.status)})`);
  });
});
