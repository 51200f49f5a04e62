// Builds across instances (decisions §15): a build's log followed live from another instance; one fair build queue shared by every instance.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { eventually } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { testEngine } from '../helpers/apps.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startCluster, type Cluster, type Instance } from '../helpers/instances.js';
import { removeInstanceObjects, testDatabase } from '../helpers/server.js';

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
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const installation = (await client.query<{ id: string }>('select id from instance')).rows[0]?.id;
    await client.end();
    if (installation !== undefined) await removeInstanceObjects(installation);
    await database.drop();
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
    const id = await createApp(a, userToken, 'ha-follow', ['RUN echo first-marker && sleep 15 && echo second-marker']);
    const started = await a.request('POST', `/api/v1/deployments/${id}/deploy`, { token: userToken });
    assert.equal(started.status, 202, started.text);
    const buildId = started.json.id as string;
    const buildStatus = async (): Promise<string> => (await b.request('GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token: userToken })).json.status as string;

    // Followed on B (the build runs on A: builds start where they are deployed when a slot is free).
    const res = await fetch(`${b.url}/api/v1/deployments/${id}/builds/${buildId}/logs?follow=true`, {
      headers: { authorization: `Bearer ${userToken}` },
      signal: AbortSignal.timeout(240_000),
    });
    assert.equal(res.status, 200);
    const decoder = new TextDecoder();
    let text = '';
    let statusAtMarker: string | undefined;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      // The marker came while the build still runs (it sleeps 15 s after printing it).
      if (statusAtMarker === undefined && text.includes('first-marker')) statusAtMarker = await buildStatus();
    }
    assert.equal(statusAtMarker, 'building', 'the first line reached the follower before the build ended');
    // The stream ended with the build: it has ended, and the log is all there.
    assert.equal(await buildStatus(), 'succeeded', text);
    assert.match(text, /second-marker/);
    assert.match(text, /==> live at build/);
    const whole = await a.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token: userToken });
    assert.equal(whole.text, text, 'the followed log is the log');
    await eventually(async () => ((await b.request('DELETE', `/api/v1/deployments/${id}`, { token: userToken })).status === 204 ? true : undefined), 60_000, 'the delete');
  });
});
