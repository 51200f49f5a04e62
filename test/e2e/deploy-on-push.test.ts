// End to end: a real git server, real pushes, signed GitHub-shaped deliveries → the pushed tip built, released and served; late pushes not.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { appRequest, eventually, testEngine, uniqueSubdomain } from '../helpers/apps.js';
import { ensureBusyboxImage, BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

/** A busybox httpd app serving `body`; `slowBuild` adds a RUN step that keeps the build busy. */
function appFiles(body: string, slowBuild = false): Record<string, string> {
  const dockerfile = [
    `FROM ${BUSYBOX_IMAGE}`,
    ...(slowBuild ? ['RUN sleep 60'] : []),
    'COPY index.html /www/index.html',
    'EXPOSE 8080',
    'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]',
    '',
  ].join('\n');
  return { Dockerfile: dockerfile, 'index.html': body };
}

describe('deploy on push (end to end)', () => {
  let ts: TestServer;
  let git: GitServer;
  let token: string;

  before(async () => {
    await ensureBusyboxImage(testEngine());
    git = await startGitServer();
    ts = await startTestServer();
    token = (await ts.newUser('push')).token;
  });
  after(async () => {
    await ts.close();
    await git.close();
  });

  /** A deployment of a new repository (default branch `main`, no branch set) with auto_deploy and a webhook. */
  async function pushApp(files: Record<string, string>): Promise<{ repo: string; id: string; subdomain: string; secret: string }> {
    const repo = `push-${crypto.randomUUID()}`;
    const { url } = await git.createRepo(repo, files);
    const subdomain = uniqueSubdomain('push');
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: repo, subdomain, repo_url: url, auto_deploy: true } });
    assert.equal(created.status, 201, created.text);
    const hook = await ts.request('POST', `/api/v1/deployments/${created.json.id}/webhook`, { token });
    assert.equal(hook.status, 201, hook.text);
    return { repo, id: created.json.id, subdomain, secret: hook.json.secret };
  }

  /** Delivers a GitHub-shaped push event, signed over its raw bytes. */
  function deliverPush(app: { id: string; secret: string }, ref: string, sha: string, delivery: string = crypto.randomUUID()): Promise<HttpResult> {
    const body = Buffer.from(JSON.stringify({ ref, before: '0'.repeat(40), after: sha, created: false, deleted: false, head_commit: { id: sha } }));
    const signature = `sha256=${crypto.createHmac('sha256', app.secret).update(body).digest('hex')}`;
    return ts.request('POST', `/api/v1/hooks/${app.id}`, {
      raw: body,
      headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': delivery, 'x-hub-signature-256': signature },
    });
  }

  const builds = async (id: string): Promise<Array<{ id: string; status: string; commit_sha: string }>> =>
    (await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token })).json;

  /** Waits for a build to end (with a time limit) and returns its final record. */
  const finished = (id: string, buildId: string): Promise<{ status: string; commit_sha: string; error: string | null }> =>
    eventually(
      async () => {
        const res = await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token });
        return res.json.status === 'building' ? undefined : res.json;
      },
      240_000,
      `build ${buildId} to end`,
    );

  test('a push of the default branch deploys exactly the pushed commit while it is the tip; a late push, a redelivery and another branch build nothing', async () => {
    const app = await pushApp(appFiles('v1\n'));
    const outrun = await git.commit(app.repo, appFiles('v2\n'));
    // The branch moves on before the delivery arrives: the late push is stale (decisions §10, 2026-11-25).
    const pushed = await git.commit(app.repo, appFiles('v3\n'));
    const late = await deliverPush(app, 'refs/heads/main', outrun);
    assert.equal(late.status, 200, late.text);
    assert.match(late.json.message, /stale/);
    const delivery = crypto.randomUUID();
    const res = await deliverPush(app, 'refs/heads/main', pushed, delivery);
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.commit_sha, pushed);
    const done = await finished(app.id, res.json.id);
    assert.equal(done.status, 'succeeded', String(done.error));
    assert.equal(done.commit_sha, pushed);
    assert.equal((await appRequest(ts.port, app.subdomain)).body, 'v3\n');

    const again = await deliverPush(app, 'refs/heads/main', pushed, delivery);
    assert.equal(again.status, 200, again.text);
    const feature = await git.commit(app.repo, appFiles('feature\n'), { branch: 'feature' });
    const other = await deliverPush(app, 'refs/heads/feature', feature);
    assert.equal(other.status, 200, other.text);
    assert.deepEqual((await builds(app.id)).map((b) => b.commit_sha), [pushed], 'one build, of the pushed commit');
    assert.equal((await appRequest(ts.port, app.subdomain)).body, 'v3\n');

    const recorded = (await ts.request('GET', `/api/v1/deployments/${app.id}/webhook/deliveries`, { token })).json as Array<Record<string, unknown>>;
    assert.deepEqual(
      recorded.map((d) => [d.outcome, d.ref, d.commit_sha]),
      [
        ['ignored', 'refs/heads/feature', feature],
        ['ignored', 'refs/heads/main', pushed],
        ['deployed', 'refs/heads/main', pushed],
        ['ignored', 'refs/heads/main', outrun],
      ],
    );
    assert.equal(recorded[2]?.build_id, res.json.id);
    assert.equal(recorded[2]?.delivery_id, delivery);
    assert.match(String(recorded[3]?.reason), /stale/);
  });

  test('a push while a build of an older push runs cancels the older build; the newer commit is served', async () => {
    const app = await pushApp(appFiles('first\n'));
    const slow = await git.commit(app.repo, appFiles('slow\n', true));
    const older = await deliverPush(app, 'refs/heads/main', slow);
    assert.equal(older.status, 202, older.text);
    const fast = await git.commit(app.repo, appFiles('fast\n'));
    const newer = await deliverPush(app, 'refs/heads/main', fast);
    assert.equal(newer.status, 202, newer.text);
    assert.equal((await finished(app.id, older.json.id)).status, 'cancelled');
    const done = await finished(app.id, newer.json.id);
    assert.equal(done.status, 'succeeded', String(done.error));
    assert.equal(done.commit_sha, fast);
    assert.equal((await appRequest(ts.port, app.subdomain)).body, 'fast\n');
  });
});
