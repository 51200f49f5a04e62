// Builds across instances (decisions §15): a build's log followed live from another instance; one fair build queue shared by every instance.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { eventually } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { testEngine } from '../helpers/apps.js';
import { docker } from '../helpers/databases.js';
import { execIn } from '../helpers/engine-exec.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startCluster, type Cluster, type Instance } from '../helpers/instances.js';
import { dropClusterDatabase, testDatabase } from '../helpers/server.js';

describe('builds across instances', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  let cluster: Cluster;
  let git: GitServer;
  let userToken: string;

  before(async () => {
    await ensureBusyboxImage(testEngine());
    git = await startGitServer();
    cluster = await startCluster(database.url, 2, { SLIPWAY_MAX_CONCURRENT_BUILDS: '2' });
    const [a] = cluster.instances as [Instance];
    const email = `ha-builds-${process.pid}@example.test`;
    assert.equal((await a.request('POST', '/api/v1/users', { token: cluster.adminToken, body: { email, password: 'ha-password-1' } })).status, 201);
    const login = await a.request('POST', '/api/v1/auth/login', { body: { email, password: 'ha-password-1' } });
    userToken = login.json.token as string;
  });
  after(async () => {
    await cluster?.close();
    await git?.close();
    await dropClusterDatabase(database);
  });

  /** A git deployment of `token`'s whose build runs `steps` (RUN lines) before serving. */
  const createApp = async (via: Instance, token: string, label: string, steps: string[]): Promise<string> => {
    const dockerfile = [`FROM ${BUSYBOX_IMAGE}`, ...steps, 'RUN mkdir -p /www && echo ok > /www/index.html', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''].join('\n');
    const name = `${label}-${process.pid}`;
    const repo = await git.createRepo(name, { Dockerfile: dockerfile });
    const created = await via.request('POST', '/api/v1/deployments', { token, body: { name, subdomain: name, repo_url: repo.url, branch: 'main' } });
    assert.equal(created.status, 201, created.text);
    return created.json.id as string;
  };

  test('a build running on one instance has its log followed live from another, until the build ends', async () => {
    const [a, b] = cluster.instances as [Instance, Instance];
    // A step of its own each run: a layer cached by an earlier run on the same engine would end the build at once.
    // It waits (60 s at most) until the test releases it, once both followers saw its first line while it still ran.
    const marker = crypto.randomUUID();
    const wait = 'i=0; while [ ! -e /release ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done';
    const id = await createApp(a, userToken, 'ha-follow', [`RUN echo first-marker ${marker} && ${wait}; echo second-marker`]);
    const started = await a.request('POST', `/api/v1/deployments/${id}/deploy`, { token: userToken });
    assert.equal(started.status, 202, started.text);
    const buildId = started.json.id as string;
    const buildStatus = async (): Promise<string> => (await b.request('GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token: userToken })).json.status as string;

    // Followed on both instances at once: one of them is not the one that took the build from the queue.
    const seen: Array<() => void> = [];
    const seenByBoth = Promise.all([0, 1].map(() => new Promise<void>((resolve) => seen.push(resolve))));
    const follow = async (via: Instance, i: number): Promise<{ text: string; statusAtMarker: string | undefined }> => {
      const res = await fetch(`${via.url}/api/v1/deployments/${id}/builds/${buildId}/logs?follow=true`, {
        headers: { authorization: `Bearer ${userToken}` },
        signal: AbortSignal.timeout(240_000),
      });
      assert.equal(res.status, 200);
      const decoder = new TextDecoder();
      let text = '';
      let statusAtMarker: string | undefined;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        // The marker came while the build still runs (it waits for the release below after printing it).
        if (statusAtMarker === undefined && text.includes('first-marker')) {
          statusAtMarker = await buildStatus();
          seen[i]?.();
        }
      }
      return { text, statusAtMarker };
    };
    const following = Promise.all([follow(a, 0), follow(b, 1)]);
    // (A follower that ends or fails early ends the wait too: the assertions below then say what it saw.)
    const endedEarly = await Promise.race([seenByBoth.then(() => false), following.then(() => true)]);
    if (!endedEarly) {
      // The build's step runs in a container of the engine's builder: released by the file it waits for.
      const step = await eventually(async () => (await docker.listContainers()).find((c) => c.Command.includes(marker)), 30_000, 'the build step container');
      await execIn(docker, step.Id, ['touch', '/release']);
    }
    const followed = await following;
    // The streams ended with the build: it has ended, and the log is all there.
    assert.equal(await buildStatus(), 'succeeded');
    const runner = (await a.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token: userToken })).text;
    for (const [i, { text, statusAtMarker }] of followed.entries()) {
      assert.equal(statusAtMarker, 'building', `the first line reached the follower on instance ${i} before the build ended`);
      assert.match(text, /second-marker/);
      assert.match(text, /==> live at build/);
      assert.equal(text, runner, `the log followed on instance ${i} is the log`);
    }
    await eventually(async () => ((await b.request('DELETE', `/api/v1/deployments/${id}`, { token: userToken })).status === 204 ? true : undefined), 60_000, 'the delete');
  });

  test("builds wait in one queue: any instance with a free slot takes the next, none twice, user B is not starved behind user A's flood, and a queued build is cancelled from another instance", async () => {
    const [a, b] = cluster.instances as [Instance, Instance];
    const bob = `ha-bob-${process.pid}@example.test`;
    assert.equal((await a.request('POST', '/api/v1/users', { token: cluster.adminToken, body: { email: bob, password: 'ha-password-1' } })).status, 201);
    const bobToken = (await b.request('POST', '/api/v1/auth/login', { body: { email: bob, password: 'ha-password-1' } })).json.token as string;
    // A floods through instance 0 with builds that cannot end during the test.
    const flood: Array<{ id: string; buildId: string }> = [];
    for (let i = 0; i < 4; i++) {
      const id = await createApp(a, userToken, `ha-flood${i}`, ['RUN echo flood-step && sleep 600']);
      const res = await a.request('POST', `/api/v1/deployments/${id}/deploy`, { token: userToken });
      assert.equal(res.status, 202, res.text);
      flood.push({ id, buildId: res.json.id as string });
    }
    const logOf = async (app: { id: string; buildId: string }): Promise<string> =>
      (await b.request('GET', `/api/v1/deployments/${app.id}/builds/${app.buildId}/logs`, { token: userToken })).text;
    const headers = (log: string, buildId: string): number => log.split(`==> build ${buildId} `).length - 1;
    try {
      // Two of A's builds run: one on each instance (each keeps its last slot for a user with none running).
      await eventually(async () => {
        const logs = await Promise.all(flood.map(logOf));
        return logs.filter((log) => log.includes('flood-step')).length >= 2 ? true : undefined;
      }, 180_000, "two of A's builds to reach their slow step");
      const running = await eventually(async () => {
        const listed = (await a.request('GET', '/api/v1/instances', { token: cluster.adminToken })).json as Array<{ url: string; builds_running: number }>;
        return listed.length === 2 && listed.every((i) => i.builds_running >= 1) ? listed : undefined;
      }, 60_000, 'both instances to be running a build');
      assert.deepEqual(running.map((i) => i.builds_running), [1, 1], 'the builds queued on instance 0 run on both instances');

      // B's build, deployed through instance 1, starts at once and ends while A's are still queued or running.
      const quick = await createApp(b, bobToken, 'ha-bob', []);
      const done = await b.request('POST', `/api/v1/deployments/${quick}/deploy?wait=true`, { token: bobToken });
      assert.equal(done.status, 200, done.text);
      assert.equal(done.json.status, 'succeeded', done.text);
      const logs = await Promise.all(flood.map(logOf));
      for (const [i, app] of flood.entries()) {
        const build = (await a.request('GET', `/api/v1/deployments/${app.id}/builds/${app.buildId}`, { token: userToken })).json;
        assert.equal(build.status, 'building', `A's build ${i}`);
        assert.ok(headers(logs[i] ?? '', app.buildId) <= 1, `A's build ${i} started at most once:\n${logs[i]}`);
      }
      const started = flood.filter((app, i) => headers(logs[i] ?? '', app.buildId) === 1);
      assert.equal(started.length, 2, "two of A's builds started, each once");

      // A build still waiting in the queue (queued on instance 0) is cancelled from instance 1: it never starts.
      const waiting = flood.find((app) => !started.includes(app)) as { id: string; buildId: string };
      const cancelled = await b.request('POST', `/api/v1/deployments/${waiting.id}/cancel`, { token: userToken });
      assert.equal(cancelled.status, 200, cancelled.text);
      assert.equal((await a.request('GET', `/api/v1/deployments/${waiting.id}/builds/${waiting.buildId}`, { token: userToken })).json.status, 'cancelled');
      const log = await logOf(waiting);
      assert.match(log, /cancelled: cancelled by the user/);
      assert.equal(headers(log, waiting.buildId), 0, 'it never started');
    } finally {
      // Stopping a deployment cancels its build, wherever it runs or waits.
      for (const app of flood) await b.request('POST', `/api/v1/deployments/${app.id}/stop`, { token: userToken });
      for (const app of flood) {
        await eventually(async () => {
          const build = (await a.request('GET', `/api/v1/deployments/${app.id}/builds/${app.buildId}`, { token: userToken })).json;
          return build.status === 'building' ? undefined : true;
        }, 120_000, `A's build ${app.buildId} to end`);
      }
    }
  });
});
