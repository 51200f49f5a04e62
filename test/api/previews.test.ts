// API tests: the previews flag, signed pull request events from GitHub, Gitea and GitLab, and every answer of decisions §17 (builds fail fast: the repository has no Dockerfile).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { eventually } from '../helpers/apps.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { pullRequestBody, pullRequestHeaders, type Forge, type PullRequestSpec } from '../helpers/pull-requests.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;
interface App {
  id: string;
  subdomain: string;
  secret: string;
  repo: string;
}

describe('preview deployments: API', () => {
  let s: TestServer;
  let git: GitServer;
  let user: User;
  let counter = 0;

  before(async () => {
    git = await startGitServer();
    s = await startTestServer();
    user = await s.newUser('previews');
  });
  after(async () => {
    await s.close();
    await git.close();
  });

  /** A git deployment (branch main) of a new repository without a Dockerfile, with a webhook. */
  async function previewApp(extra: Record<string, unknown> = { previews: true }): Promise<App> {
    counter += 1;
    const repo = `pv-${process.pid}-${counter}`;
    const { url } = await git.createRepo(repo, { 'README.md': 'no Dockerfile here\n' });
    const subdomain = `pv-${process.pid}-${counter}`;
    const created = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: repo, subdomain, repo_url: url, branch: 'main', ...extra } });
    assert.equal(created.status, 201, created.text);
    const hook = await s.request('POST', `/api/v1/deployments/${created.json.id}/webhook`, { token: user.token });
    assert.equal(hook.status, 201, hook.text);
    return { id: created.json.id, subdomain, secret: hook.json.secret, repo };
  }

  /** A commit on the pull request's branch, published at `ref` as the forge does; returns its sha. */
  async function pullHead(app: App, number: number, ref = `refs/pull/${number}/head`): Promise<string> {
    await git.commit(app.repo, { 'change.txt': `pull request ${number}: ${crypto.randomUUID()}\n` }, { branch: `feature-${number}` });
    return git.setRef(app.repo, ref);
  }

  const deliver = (app: App, forge: Forge, spec: PullRequestSpec, options: { delivery?: string; secret?: string | null } = {}): Promise<HttpResult> => {
    const body = pullRequestBody(forge, spec);
    const secret = options.secret === null ? undefined : (options.secret ?? app.secret);
    return s.request('POST', `/api/v1/hooks/${app.id}`, { raw: body, headers: pullRequestHeaders(forge, secret, body, options.delivery) });
  };

  const previews = async (app: App): Promise<Array<Record<string, unknown>>> => {
    const res = await s.request('GET', `/api/v1/deployments/${app.id}/previews`, { token: user.token });
    assert.equal(res.status, 200, res.text);
    return res.json;
  };
  const previewBuilds = async (app: App, number: number): Promise<Array<{ id: string; status: string; commit_sha: string }>> => {
    const res = await s.request('GET', `/api/v1/deployments/${app.id}/previews/${number}/builds`, { token: user.token });
    assert.equal(res.status, 200, res.text);
    return res.json;
  };
  /** Waits for a preview's build to end; returns its record and its log. */
  async function ended(app: App, number: number, buildId: string): Promise<{ build: { status: string; error: string | null }; log: string }> {
    const build = await eventually(
      async () => {
        const res = await s.request('GET', `/api/v1/deployments/${app.id}/previews/${number}/builds/${buildId}`, { token: user.token });
        return res.json.status === 'building' ? undefined : res.json;
      },
      120_000,
      `preview build ${buildId} to end`,
    );
    const log = await s.request('GET', `/api/v1/deployments/${app.id}/previews/${number}/builds/${buildId}/logs`, { token: user.token });
    assert.equal(log.status, 200, log.text);
    return { build, log: log.text };
  }
  const deliveries = async (app: App): Promise<Array<Record<string, unknown>>> =>
    (await s.request('GET', `/api/v1/deployments/${app.id}/webhook/deliveries`, { token: user.token })).json;

  test('previews is a git deployment setting: create, PATCH, shown; an archive deployment refuses true', async () => {
    const app = await previewApp();
    const shown = await s.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token });
    assert.equal(shown.json.previews, true);
    const off = await s.request('PATCH', `/api/v1/deployments/${app.id}`, { token: user.token, body: { previews: false } });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.json.previews, false);
    const plain = await previewApp({});
    assert.equal((await s.request('GET', `/api/v1/deployments/${plain.id}`, { token: user.token })).json.previews, false);

    const archive = await s.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: 'a', subdomain: `pv-archive-${process.pid}`, source_type: 'archive', previews: true },
    });
    assertError(archive, 400, 'validation_error');
    const archiveOk = await s.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: 'a', subdomain: `pv-archive-${process.pid}`, source_type: 'archive' },
    });
    assert.equal(archiveOk.status, 201, archiveOk.text);
    assertError(await s.request('PATCH', `/api/v1/deployments/${archiveOk.json.id}`, { token: user.token, body: { previews: true } }), 400, 'validation_error');
    assertError(await s.request('PATCH', `/api/v1/deployments/${app.id}`, { token: user.token, body: { previews: 'yes' } }), 400, 'validation_error');
  });

  test('GitHub: opened builds the head at refs/pull/<n>/head; synchronize rebuilds; a repeat does nothing; closed removes; the log records each', async () => {
    const app = await previewApp();
    const first = await pullHead(app, 1);
    const opened = await deliver(app, 'github', { action: 'opened', number: 1, headSha: first, headBranch: 'feature-1' });
    assert.equal(opened.status, 202, opened.text);
    assert.equal(opened.json.commit_sha, first);

    const list = await previews(app);
    assert.equal(list.length, 1);
    const preview = list[0] ?? {};
    assert.deepEqual(Object.keys(preview).sort(), ['branch', 'commit_sha', 'created_at', 'deployment_id', 'id', 'number', 'status', 'updated_at', 'url']);
    assert.equal(preview.deployment_id, app.id);
    assert.equal(preview.number, 1);
    assert.equal(preview.branch, 'feature-1');
    assert.equal(preview.commit_sha, first);
    assert.equal(opened.json.deployment_id, preview.id);
    assert.match(String(preview.url), new RegExp(`^http://${app.subdomain}-pr-1\\.localhost(:\\d+)?/?$`));
    const one = await s.request('GET', `/api/v1/deployments/${app.id}/previews/1`, { token: user.token });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.json, preview);
    // Previews are listed under their deployment only, and are no deployment of their own in the API.
    const all = (await s.request('GET', '/api/v1/deployments?limit=500', { token: user.token })).json as Array<{ id: string }>;
    assert.ok(all.some((d) => d.id === app.id));
    assert.ok(!all.some((d) => d.id === preview.id), 'a preview is not in the deployment list');
    assertError(await s.request('GET', `/api/v1/deployments/${String(preview.id)}`, { token: user.token }), 404, 'not_found');

    const firstBuild = await ended(app, 1, opened.json.id);
    assert.equal(firstBuild.build.status, 'failed');
    assert.match(firstBuild.log, /refs\/pull\/1\/head/);
    assert.match(firstBuild.log, /Dockerfile not found/);

    const second = await pullHead(app, 1);
    const delivery = crypto.randomUUID();
    const sync = await deliver(app, 'github', { action: 'synchronize', number: 1, headSha: second, headBranch: 'feature-1' }, { delivery });
    assert.equal(sync.status, 202, sync.text);
    assert.equal(sync.json.commit_sha, second);
    const again = await deliver(app, 'github', { action: 'synchronize', number: 1, headSha: second, headBranch: 'feature-1' }, { delivery });
    assert.equal(again.status, 200, again.text);
    assert.equal(typeof again.json.message, 'string');
    assert.deepEqual((await previewBuilds(app, 1)).map((b) => b.commit_sha), [second, first]);
    assert.equal((await s.request('GET', `/api/v1/deployments/${app.id}/previews/1`, { token: user.token })).json.commit_sha, second);
    await ended(app, 1, sync.json.id);

    const closed = await deliver(app, 'github', { action: 'closed', number: 1, headSha: second, merged: true });
    assert.equal(closed.status, 200, closed.text);
    assert.match(closed.json.message, /removed/);
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/1`, { token: user.token }), 404, 'not_found');
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/1/builds`, { token: user.token }), 404, 'not_found');
    assert.deepEqual(await previews(app), []);

    const log = await deliveries(app);
    assert.deepEqual(
      log.map((d) => [d.event, d.outcome, d.ref, d.commit_sha]),
      [
        ['pull_request', 'removed', 'refs/pull/1/head', second],
        ['pull_request', 'ignored', 'refs/pull/1/head', second],
        ['pull_request', 'deployed', 'refs/pull/1/head', second],
        ['pull_request', 'deployed', 'refs/pull/1/head', first],
      ],
    );
    assert.equal(log[2]?.build_id, sync.json.id);
    assert.equal(log[3]?.build_id, opened.json.id);
  });

  test("a preview build's Dockerfile: GET …/previews/{n}/builds/{id}/dockerfile gives the one it used, as text or JSON; another build id → 404", async () => {
    const app = await previewApp();
    const dockerfile = 'FROM scratch\nCOPY change.txt /change.txt\n';
    await git.commit(app.repo, { Dockerfile: dockerfile }, { branch: 'feature-7' });
    const head = await pullHead(app, 7);
    const opened = await deliver(app, 'github', { action: 'opened', number: 7, headSha: head, headBranch: 'feature-7' });
    assert.equal(opened.status, 202, opened.text);
    await ended(app, 7, opened.json.id);
    const route = `/api/v1/deployments/${app.id}/previews/7/builds/${opened.json.id}/dockerfile`;
    const text = await s.request('GET', route, { token: user.token });
    assert.equal(text.status, 200, text.text);
    assert.equal(text.text, dockerfile);
    assert.match(text.headers.get('content-type') ?? '', /^text\/plain/);
    const json = await s.request('GET', route, { token: user.token, headers: { accept: 'application/json' } });
    assert.deepEqual([json.json.dockerfile, json.json.generated, json.json.path], [dockerfile, false, 'Dockerfile']);
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/7/builds/${crypto.randomUUID()}/dockerfile`, { token: user.token }), 404, 'not_found');
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/8/builds/${opened.json.id}/dockerfile`, { token: user.token }), 404, 'not_found');
  });

  test('a head ref that cannot be fetched: the preview is made and its build fails with git\'s error in its log', async () => {
    const app = await previewApp();
    const sha = crypto.randomBytes(20).toString('hex');
    const opened = await deliver(app, 'github', { action: 'opened', number: 9, headSha: sha });
    assert.equal(opened.status, 202, opened.text);
    const { build, log } = await ended(app, 9, opened.json.id);
    assert.equal(build.status, 'failed');
    assert.match(log, /couldn't find remote ref refs\/pull\/9\/head/);
    assert.match(String(build.error), /refs\/pull\/9\/head/);
    assert.equal((await s.request('GET', `/api/v1/deployments/${app.id}/previews/9`, { token: user.token })).json.status, 'failed');
  });

  test('bad input: unsigned or wrongly signed → 401; another base branch, an unknown action, previews off → 200 and nothing built', async () => {
    const app = await previewApp();
    const sha = await pullHead(app, 3);
    const spec = { action: 'opened', number: 3, headSha: sha };
    for (const forge of ['github', 'gitea', 'gitlab'] as const) {
      const gitlabSpec = forge === 'gitlab' ? { ...spec, action: 'open' } : spec;
      assertError(await deliver(app, forge, gitlabSpec, { secret: null }), 401, 'unauthorized');
      assertError(await deliver(app, forge, gitlabSpec, { secret: 'slw_wh_wrong' }), 401, 'unauthorized');
    }
    const other = await deliver(app, 'github', { ...spec, base: 'develop' });
    assert.equal(other.status, 200, other.text);
    assert.match(other.json.message, /develop/);
    for (const action of ['edited', 'labeled', 'assigned']) {
      const res = await deliver(app, 'github', { ...spec, action });
      assert.equal(res.status, 200, res.text);
      assert.match(res.json.message, new RegExp(action));
    }
    const gitlabOther = await deliver(app, 'gitlab', { ...spec, action: 'approved' });
    assert.equal(gitlabOther.status, 200, gitlabOther.text);
    assert.equal((await s.request('PATCH', `/api/v1/deployments/${app.id}`, { token: user.token, body: { previews: false } })).status, 200);
    const off = await deliver(app, 'github', spec);
    assert.equal(off.status, 200, off.text);
    assert.match(off.json.message, /previews are off/);
    assert.deepEqual(await previews(app), []);
    const log = await deliveries(app);
    assert.equal(log.filter((d) => d.outcome === 'rejected').length, 6);
    assert.equal(log.filter((d) => d.outcome === 'ignored').length, 6);
    assert.ok(log.every((d) => d.build_id === null));
  });

  test('Gitea/Forgejo (opened, synchronized, closed) and GitLab (open, update, merge) payloads; GitLab fetches refs/merge-requests/<n>/head', async () => {
    const app = await previewApp();
    const gitea1 = await pullHead(app, 4);
    const opened = await deliver(app, 'gitea', { action: 'opened', number: 4, headSha: gitea1 });
    assert.equal(opened.status, 202, opened.text);
    const gitea2 = await pullHead(app, 4);
    const sync = await deliver(app, 'gitea', { action: 'synchronized', number: 4, headSha: gitea2 });
    assert.equal(sync.status, 202, sync.text);
    assert.equal(sync.json.commit_sha, gitea2);
    assert.match((await ended(app, 4, sync.json.id)).log, /refs\/pull\/4\/head/);
    const closed = await deliver(app, 'gitea', { action: 'closed', number: 4, headSha: gitea2 });
    assert.equal(closed.status, 200, closed.text);
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/4`, { token: user.token }), 404, 'not_found');

    const lab1 = await pullHead(app, 5, 'refs/merge-requests/5/head');
    const open = await deliver(app, 'gitlab', { action: 'open', number: 5, headSha: lab1, headBranch: 'feature-5' });
    assert.equal(open.status, 202, open.text);
    const lab2 = await pullHead(app, 5, 'refs/merge-requests/5/head');
    const update = await deliver(app, 'gitlab', { action: 'update', number: 5, headSha: lab2 });
    assert.equal(update.status, 202, update.text);
    const built = await ended(app, 5, update.json.id);
    assert.match(built.log, /refs\/merge-requests\/5\/head/);
    assert.match(built.log, /Dockerfile not found/, 'the commit was fetched');
    const preview = (await s.request('GET', `/api/v1/deployments/${app.id}/previews/5`, { token: user.token })).json;
    assert.equal(preview.commit_sha, lab2);
    assert.equal(preview.branch, 'feature-5');
    const merged = await deliver(app, 'gitlab', { action: 'merge', number: 5, headSha: lab2 });
    assert.equal(merged.status, 200, merged.text);
    assert.deepEqual(await previews(app), []);
    const log = await deliveries(app);
    assert.deepEqual(
      log.map((d) => [d.provider, d.outcome, d.ref]),
      [
        ['gitlab', 'removed', 'refs/merge-requests/5/head'],
        ['gitlab', 'deployed', 'refs/merge-requests/5/head'],
        ['gitlab', 'deployed', 'refs/merge-requests/5/head'],
        ['gitea', 'removed', 'refs/pull/4/head'],
        ['gitea', 'deployed', 'refs/pull/4/head'],
        ['gitea', 'deployed', 'refs/pull/4/head'],
      ],
    );
  });

  test("a team's deployment: its previews follow the team's roles (viewer reads, developer deletes) and stay out of every deployment list", async () => {
    const owner = await s.newUser('pv-owner');
    const developer = await s.newUser('pv-dev');
    const viewer = await s.newUser('pv-viewer');
    const team = await s.request('POST', '/api/v1/teams', { token: owner.token, body: { name: `previews ${process.pid}` } });
    assert.equal(team.status, 201, team.text);
    for (const [member, role] of [[developer, 'developer'], [viewer, 'viewer']] as const) {
      const added = await s.request('POST', `/api/v1/teams/${team.json.id}/members`, { token: owner.token, body: { email: member.email, role } });
      assert.equal(added.status, 201, added.text);
    }
    counter += 1;
    const repo = `pv-${process.pid}-${counter}`;
    const { url } = await git.createRepo(repo, { 'README.md': 'x\n' });
    const subdomain = `pv-${process.pid}-${counter}`;
    const created = await s.request('POST', '/api/v1/deployments', {
      token: owner.token,
      body: { name: repo, subdomain, repo_url: url, branch: 'main', previews: true, team_id: team.json.id },
    });
    assert.equal(created.status, 201, created.text);
    const hook = await s.request('POST', `/api/v1/deployments/${created.json.id}/webhook`, { token: developer.token });
    assert.equal(hook.status, 201, hook.text);
    const app: App = { id: created.json.id, subdomain, secret: hook.json.secret, repo };
    const opened = await deliver(app, 'github', { action: 'opened', number: 8, headSha: crypto.randomBytes(20).toString('hex') });
    assert.equal(opened.status, 202, opened.text);

    for (const member of [owner, developer, viewer]) {
      const list = await s.request('GET', '/api/v1/deployments?limit=500', { token: member.token });
      assert.ok(list.json.some((d: { id: string }) => d.id === app.id));
      assert.ok(!list.json.some((d: { id: string }) => d.id === opened.json.deployment_id), 'the preview is not listed as a deployment');
      const previewsSeen = await s.request('GET', `/api/v1/deployments/${app.id}/previews`, { token: member.token });
      assert.equal(previewsSeen.status, 200, previewsSeen.text);
      assert.equal(previewsSeen.json.length, 1);
    }
    assertError(await s.request('DELETE', `/api/v1/deployments/${app.id}/previews/8`, { token: viewer.token }), 403, 'forbidden');
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/8`, { token: user.token }), 404, 'not_found');
    assert.equal((await s.request('DELETE', `/api/v1/deployments/${app.id}/previews/8`, { token: developer.token })).status, 204);
    // The webhook builds and removes a team's previews as its developer would.
    const sha = crypto.randomBytes(20).toString('hex');
    assert.equal((await deliver(app, 'github', { action: 'opened', number: 9, headSha: sha })).status, 202);
    const closed = await deliver(app, 'github', { action: 'closed', number: 9, headSha: sha });
    assert.equal(closed.status, 200, closed.text);
    assert.match(closed.json.message, /removed/);
    assert.deepEqual((await s.request('GET', `/api/v1/deployments/${app.id}/previews`, { token: viewer.token })).json, []);
  });

  test('a taken subdomain and the 11th preview answer 200 and build nothing; delete frees room; deleting the deployment deletes its previews', async () => {
    const app = await previewApp();
    const squatter = await s.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: 'squatter', subdomain: `${app.subdomain}-pr-30`, repo_url: 'http://127.0.0.1:9/none.git' },
    });
    assert.equal(squatter.status, 201, squatter.text);
    const taken = await deliver(app, 'github', { action: 'opened', number: 30, headSha: crypto.randomBytes(20).toString('hex') });
    assert.equal(taken.status, 200, taken.text);
    assert.match(taken.json.message, /in use/);
    assert.deepEqual(await previews(app), []);

    for (let n = 11; n <= 20; n++) {
      const res = await deliver(app, 'github', { action: 'opened', number: n, headSha: crypto.randomBytes(20).toString('hex') });
      assert.equal(res.status, 202, `#${n}: ${res.text}`);
    }
    const eleventh = await deliver(app, 'github', { action: 'opened', number: 21, headSha: crypto.randomBytes(20).toString('hex') });
    assert.equal(eleventh.status, 200, eleventh.text);
    assert.match(eleventh.json.message, /10 previews/);
    assert.equal((await previews(app)).length, 10);
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/21`, { token: user.token }), 404, 'not_found');

    assert.equal((await s.request('DELETE', `/api/v1/deployments/${app.id}/previews/11`, { token: user.token })).status, 204);
    assertError(await s.request('DELETE', `/api/v1/deployments/${app.id}/previews/11`, { token: user.token }), 404, 'not_found');
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews/abc`, { token: user.token }), 404, 'not_found');
    const now = await deliver(app, 'github', { action: 'opened', number: 21, headSha: crypto.randomBytes(20).toString('hex') });
    assert.equal(now.status, 202, now.text);

    // Another user sees none of it.
    const other = await s.newUser('other');
    assertError(await s.request('GET', `/api/v1/deployments/${app.id}/previews`, { token: other.token }), 404, 'not_found');
    assertError(await s.request('DELETE', `/api/v1/deployments/${app.id}/previews/12`, { token: other.token }), 404, 'not_found');

    assert.equal((await s.request('DELETE', `/api/v1/deployments/${app.id}`, { token: user.token })).status, 204);
    const reuse = await s.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: 'reuse', subdomain: `${app.subdomain}-pr-12`, repo_url: 'http://127.0.0.1:9/none.git' },
    });
    assert.equal(reuse.status, 201, `the preview's subdomain is free again: ${reuse.text}`);
  });
});
