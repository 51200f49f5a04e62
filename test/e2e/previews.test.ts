// End to end: a real git server, real builds and the real engine — pull requests open, update and close previews; a fork's never sees a secret; the 11th; delete; strays swept at start.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openDatabase } from '../../src/db/database.js';
import { imageRepositoryPrefix } from '../../src/deploy/images.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE } from '../../src/runtime/engine.js';
import { appRequest, eventually, testEngine } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { pullRequestBody, pullRequestHeaders, type PullRequestSpec } from '../helpers/pull-requests.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

const SECRET = `s3cr3t-${crypto.randomBytes(6).toString('hex')}`;

/** A busybox httpd app serving `body`; it shows the variables V and S it got at build time (/build.txt) and at run time (/env.txt). */
function appFiles(body: string): Record<string, string> {
  const dockerfile = [
    `FROM ${BUSYBOX_IMAGE}`,
    'ARG V',
    'ARG S',
    'COPY index.html /www/index.html',
    'RUN echo "V=$V S=$S" > /www/build.txt',
    'EXPOSE 8080',
    'CMD ["/bin/sh", "-c", "echo \\"V=$V S=$S\\" > /www/env.txt; exec httpd -f -p $PORT -h /www"]',
    '',
  ].join('\n');
  return { Dockerfile: dockerfile, 'index.html': body };
}

interface App {
  id: string;
  subdomain: string;
  secret: string;
  repo: string;
}

describe('preview deployments (end to end)', () => {
  let ts: TestServer;
  let git: GitServer;
  let token: string;
  const engine = testEngine();

  before(async () => {
    await ensureBusyboxImage(engine);
    git = await startGitServer();
    ts = await startTestServer();
    token = (await ts.newUser('previews-e2e')).token;
  });
  after(async () => {
    await ts.close();
    await git.close();
  });

  /** A deployment of a new repository (branch main) with previews on, V (plain) and S (secret) set, and a webhook. */
  async function previewApp(): Promise<App> {
    const repo = `pr-${crypto.randomUUID()}`;
    const { url } = await git.createRepo(repo, appFiles('main\n'));
    const subdomain = `pr${crypto.randomBytes(4).toString('hex')}`;
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: repo, subdomain, repo_url: url, branch: 'main', previews: true } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    assert.equal((await ts.request('PATCH', `/api/v1/deployments/${id}/env`, { token, body: { vars: { V: 'visible' } } })).status, 200);
    assert.equal((await ts.request('PATCH', `/api/v1/deployments/${id}/env`, { token, body: { vars: { S: SECRET }, secret: true } })).status, 200);
    const hook = await ts.request('POST', `/api/v1/deployments/${id}/webhook`, { token });
    assert.equal(hook.status, 201, hook.text);
    return { id, subdomain, secret: hook.json.secret, repo };
  }

  const deliver = (app: App, spec: PullRequestSpec): Promise<HttpResult> => {
    const body = pullRequestBody('github', spec);
    return ts.request('POST', `/api/v1/hooks/${app.id}`, { raw: body, headers: pullRequestHeaders('github', app.secret, body) });
  };

  /** Waits for a preview's build to end; returns its final record. */
  const ended = (app: App, number: number, buildId: string): Promise<{ status: string; error: string | null; commit_sha: string }> =>
    eventually(
      async () => {
        const res = await ts.request('GET', `/api/v1/deployments/${app.id}/previews/${number}/builds/${buildId}`, { token });
        return res.json.status === 'building' ? undefined : res.json;
      },
      240_000,
      `preview build ${buildId} to end`,
    );

  /** Opens (or updates) pull request `number` at `sha` and waits until its preview serves that build. */
  async function built(app: App, spec: PullRequestSpec): Promise<string> {
    const res = await deliver(app, spec);
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.commit_sha, spec.headSha);
    const done = await ended(app, spec.number, res.json.id);
    assert.equal(done.status, 'succeeded', String(done.error));
    return res.json.deployment_id as string;
  }

  const page = async (subdomain: string, file = '/'): Promise<{ status: number; body: string }> => appRequest(ts.port, subdomain, { path: file });

  /** The engine objects this installation holds for a deployment: containers and image tags. */
  async function engineObjects(deploymentId: string): Promise<{ containers: number; images: number }> {
    const containers = await engine.listContainers({ [LABEL_INSTANCE]: ts.server.instanceId, [LABEL_DEPLOYMENT]: deploymentId });
    const prefix = `${imageRepositoryPrefix(ts.server.instanceId)}${deploymentId}:`;
    const images = (await engine.listImages({})).flatMap((i) => i.tags).filter((t) => t.startsWith(prefix));
    return { containers: containers.length, images: images.length };
  }

  // Two independent deployments and pull requests: their cases run side by side (the one after restarts the server).
  describe('pull requests of two deployments', { concurrency: true }, () => {
    test('opened builds and serves the head at <subdomain>-pr-<n>; synchronize serves the new head; closed removes containers, image and route at once', async () => {
      const app = await previewApp();
      await git.commit(app.repo, appFiles('pr one, first\n'), { branch: 'feature' });
      const first = await git.setRef(app.repo, 'refs/pull/1/head');
      const previewId = await built(app, { action: 'opened', number: 1, headSha: first, headBranch: 'feature' });
      const host = `${app.subdomain}-pr-1`;
      assert.equal((await page(host)).body, 'pr one, first\n');
      // The head repository is the deployment's own: the secret reaches the app at run time (never a build, §9).
      assert.equal((await page(host, '/env.txt')).body, `V=visible S=${SECRET}\n`);
      assert.equal((await page(host, '/build.txt')).body, 'V=visible S=\n');
      const shown = (await ts.request('GET', `/api/v1/deployments/${app.id}/previews/1`, { token })).json;
      assert.equal(shown.status, 'running');
      assert.equal(shown.commit_sha, first);
      // The deployment itself was never deployed: the preview serves on its own.
      assert.notEqual((await page(app.subdomain)).status, 200);

      await git.commit(app.repo, appFiles('pr one, second\n'), { branch: 'feature' });
      const second = await git.setRef(app.repo, 'refs/pull/1/head');
      assert.equal(await built(app, { action: 'synchronize', number: 1, headSha: second, headBranch: 'feature' }), previewId);
      assert.equal((await page(host)).body, 'pr one, second\n');
      const logs = await ts.request('GET', `/api/v1/deployments/${app.id}/previews/1/logs?tail=50`, { token });
      assert.equal(logs.status, 200, logs.text);

      const closed = await deliver(app, { action: 'closed', number: 1, headSha: second, merged: false });
      assert.equal(closed.status, 200, closed.text);
      // Removed by the time the delivery is answered (well within the 60 s of decisions §17).
      assert.equal((await page(host)).status, 404);
      assert.deepEqual(await engineObjects(previewId), { containers: 0, images: 0 });
      assert.equal((await ts.request('GET', `/api/v1/deployments/${app.id}/previews`, { token })).json.length, 0);
    });

    test("a fork's preview gets the non-secret variables only, at run time and at build time; the 11th preview builds nothing; deleting the deployment deletes its previews", async () => {
      const app = await previewApp();
      // The fork is a repository of its own; the forge publishes its head in the base repository's pull ref.
      const fork = `fork-${crypto.randomUUID()}`;
      await git.createRepo(fork, appFiles('from a fork\n'));
      await git.commit(fork, appFiles('fork change\n'), { branch: 'patch' });
      const head = await git.setRef(app.repo, 'refs/pull/7/head', { from: fork });
      const previewId = await built(app, { action: 'opened', number: 7, headSha: head, headBranch: 'patch', headRepo: 'someone/app' });
      const host = `${app.subdomain}-pr-7`;
      assert.equal((await page(host)).body, 'fork change\n');
      assert.equal((await page(host, '/env.txt')).body, 'V=visible S=\n', 'no secret at run time');
      assert.equal((await page(host, '/build.txt')).body, 'V=visible S=\n', 'no secret at build time');
      const deliveries = (await ts.request('GET', `/api/v1/deployments/${app.id}/webhook/deliveries`, { token })).json as Array<{ reason: string }>;
      assert.match(deliveries[0]?.reason ?? '', /fork/);

      // Nine more previews whose heads cannot be fetched (their builds fail at once): ten in all.
      for (let n = 11; n <= 19; n++) {
        const res = await deliver(app, { action: 'opened', number: n, headSha: crypto.randomBytes(20).toString('hex') });
        assert.equal(res.status, 202, `#${n}: ${res.text}`);
      }
      const eleventh = await deliver(app, { action: 'opened', number: 20, headSha: head, headRepo: 'someone/app' });
      assert.equal(eleventh.status, 200, eleventh.text);
      assert.match(eleventh.json.message, /10 previews/);
      const list = (await ts.request('GET', `/api/v1/deployments/${app.id}/previews`, { token })).json as Array<{ id: string; number: number }>;
      assert.equal(list.length, 10);
      assert.ok(!list.some((p) => p.number === 20));

      assert.equal((await ts.request('DELETE', `/api/v1/deployments/${app.id}`, { token })).status, 204);
      assert.equal((await page(host)).status, 404);
      for (const preview of list) assert.deepEqual(await engineObjects(preview.id), { containers: 0, images: 0 }, `preview #${preview.number}`);
      assert.deepEqual(await engineObjects(previewId), { containers: 0, images: 0 });
      const again = await ts.request('POST', '/api/v1/deployments', { token, body: { name: 'again', subdomain: host, repo_url: 'http://127.0.0.1:9/x.git' } });
      assert.equal(again.status, 201, `the preview's subdomain is free: ${again.text}`);
    });
  });

  test('a preview whose records are gone (a removal cut short) is swept from the engine at the next start', async () => {
    const app = await previewApp();
    await git.commit(app.repo, appFiles('doomed\n'), { branch: 'doomed' });
    const sha = await git.setRef(app.repo, 'refs/pull/3/head');
    const previewId = await built(app, { action: 'opened', number: 3, headSha: sha });
    assert.deepEqual(await engineObjects(previewId), { containers: 1, images: 1 });

    // The server stops; the records go (as a removal's transaction does) while its engine objects stay.
    await ts.server.close();
    const db = await openDatabase({ file: path.join(ts.dataDir, 'slipway.db'), url: ts.config.databaseUrl });
    await db.transaction().execute(async (trx) => {
      await trx.deleteFrom('subdomain_claims').where('owner_id', '=', previewId).execute();
      await trx.deleteFrom('deployments').where('id', '=', previewId).execute();
    });
    await db.destroy();
    const old = ts;
    ts = await startTestServer({}, old.dataDir);
    await eventually(async () => {
      const left = await engineObjects(previewId);
      return left.containers === 0 && left.images === 0 ? true : undefined;
    }, 60_000, 'the stray preview to be swept');
    assert.equal((await page(`${app.subdomain}-pr-3`)).status, 404);
  });
});
