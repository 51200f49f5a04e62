// API tests of decisions §10 (2026-11-25) as the attacks: replayed and late pushes, an `after` from another branch, and a busy repository's real GitHub traffic (@octokit/webhooks-examples) signed and replayed.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

/** The package's examples: one entry per event type, each with the payloads GitHub sent. */
interface ExampleGroup {
  readonly name: string;
  readonly examples: readonly unknown[];
}
const githubExamples = createRequire(import.meta.url)('@octokit/webhooks-examples') as readonly ExampleGroup[];

const hmacHex = (secret: string, body: Buffer): string => crypto.createHmac('sha256', secret).update(body).digest('hex');

/** Headers of a GitHub delivery of `event`, signed over `body`. */
const github = (secret: string, body: Buffer, event: string, delivery: string = crypto.randomUUID()): Record<string, string> => ({
  'content-type': 'application/json',
  'x-github-event': event,
  'x-github-delivery': delivery,
  'x-hub-signature-256': `sha256=${hmacHex(secret, body)}`,
});

const pushBody = (ref: string, sha: string): Buffer => Buffer.from(JSON.stringify({ ref, before: '0'.repeat(40), after: sha, repository: { full_name: 'o/r' } }));

describe('webhook replays and real GitHub traffic', () => {
  let s: TestServer;
  let git: GitServer;
  let token: string;
  let counter = 0;

  before(async () => {
    git = await startGitServer();
    s = await startTestServer();
    token = (await s.newUser('replays')).token;
  });
  after(async () => {
    await s.close();
    await git.close();
  });

  /** A git deployment with auto_deploy and a webhook, tracking `branch` of a new repository without a Dockerfile (builds fail after the fetch, no Docker). */
  async function hookedDeployment(branch: string): Promise<{ id: string; repo: string; secret: string }> {
    counter += 1;
    const repo = `replays-${counter}`;
    const { url } = await git.createRepo(repo, { 'README.md': 'hello\n' }, { branch });
    const created = await s.request('POST', '/api/v1/deployments', {
      token,
      body: { name: repo, subdomain: `replays-${process.pid}-${counter}`, repo_url: url, branch, auto_deploy: true },
    });
    assert.equal(created.status, 201, created.text);
    const hook = await s.request('POST', `/api/v1/deployments/${created.json.id}/webhook`, { token });
    assert.equal(hook.status, 201, hook.text);
    return { id: created.json.id, repo, secret: hook.json.secret };
  }

  const deliver = (id: string, raw: Buffer, headers: Record<string, string>): Promise<HttpResult> => s.request('POST', `/api/v1/hooks/${id}`, { raw, headers });
  const buildShas = async (id: string): Promise<string[]> =>
    ((await s.request('GET', `/api/v1/deployments/${id}/builds`, { token })).json as Array<{ commit_sha: string }>).map((b) => b.commit_sha);
  const deliveries = async (id: string): Promise<Array<Record<string, unknown>>> =>
    (await s.request('GET', `/api/v1/deployments/${id}/webhook/deliveries`, { token })).json;

  test('a captured push re-sent with a new delivery id, a late push, and an `after` only on another branch → 200 stale, no build, the log says why', async () => {
    const app = await hookedDeployment('main');
    const first = await git.commit(app.repo, { 'a.txt': '1\n' });
    const captured = pushBody('refs/heads/main', first);
    const deployed = await deliver(app.id, captured, github(app.secret, captured, 'push'));
    assert.equal(deployed.status, 202, deployed.text);

    // Replayed at once, while the commit is still the tip: it was deployed already.
    const replay = await deliver(app.id, captured, github(app.secret, captured, 'push'));
    assert.equal(replay.status, 200, replay.text);
    assert.deepEqual(Object.keys(replay.json), ['message']);
    assert.match(replay.json.message, /stale/);

    // The branch moves on; the old push replayed (or arriving late) is stale.
    const second = await git.commit(app.repo, { 'a.txt': '2\n' });
    const late = await deliver(app.id, captured, github(app.secret, captured, 'push'));
    assert.equal(late.status, 200, late.text);
    assert.match(late.json.message, /stale.*not the tip of main/);

    // A commit that exists only on `dev`, claimed as a push to main.
    const devOnly = await git.commit(app.repo, { 'dev.txt': 'dev\n' }, { branch: 'dev' });
    const forged = pushBody('refs/heads/main', devOnly);
    const wrongBranch = await deliver(app.id, forged, github(app.secret, forged, 'push'));
    assert.equal(wrongBranch.status, 200, wrongBranch.text);
    assert.match(wrongBranch.json.message, /stale.*not the tip of main/);
    assert.deepEqual(await buildShas(app.id), [first], 'only the first push built');

    // The real push of the tip still deploys, and its replay afterwards does not.
    const current = pushBody('refs/heads/main', second);
    const real = await deliver(app.id, current, github(app.secret, current, 'push'));
    assert.equal(real.status, 202, real.text);
    assert.equal(real.json.commit_sha, second);
    assert.equal((await deliver(app.id, current, github(app.secret, current, 'push'))).status, 200);
    assert.deepEqual(await buildShas(app.id), [second, first]);

    const log = await deliveries(app.id);
    assert.deepEqual(
      log.map((d) => [d.outcome, d.commit_sha]),
      [
        ['ignored', second],
        ['deployed', second],
        ['ignored', devOnly],
        ['ignored', first],
        ['ignored', first],
        ['deployed', first],
      ],
    );
    assert.match(String(log[0]?.reason), /stale.*already deployed/);
    assert.match(String(log[2]?.reason), new RegExp(`not the tip of main.*the tip is ${second.slice(0, 12)}`));
    assert.match(String(log[4]?.reason), /stale.*already deployed/);
  });

  test('a deleted tracked branch: a push of its old tip is stale', async () => {
    const app = await hookedDeployment('main');
    const sha = await git.commit(app.repo, { 'b.txt': '1\n' }, { branch: 'gone' });
    // Track a branch the repository does not have (any more).
    assert.equal((await s.request('PATCH', `/api/v1/deployments/${app.id}`, { token, body: { branch: 'release' } })).status, 200);
    const body = pushBody('refs/heads/release', sha);
    const res = await deliver(app.id, body, github(app.secret, body, 'push'));
    assert.equal(res.status, 200, res.text);
    assert.match(res.json.message, /stale.*release no longer exists/);
    assert.deepEqual(await buildShas(app.id), []);
  });

  test("every example delivery of @octokit/webhooks-examples, signed, gets a sane answer and no 429; the push that follows deploys", async () => {
    // The examples push to `master`: track it, so their pushes reach the check against the remote.
    const app = await hookedDeployment('master');
    const total = githubExamples.reduce((n, group) => n + group.examples.length, 0);
    assert.ok(githubExamples.length >= 50 && total >= 300, `${githubExamples.length} event types, ${total} deliveries`);
    const statuses = new Map<number, number>();
    let masterPushes = 0;
    for (const group of githubExamples) {
      for (const example of group.examples) {
        const raw = Buffer.from(JSON.stringify(example));
        const res = await deliver(app.id, raw, github(app.secret, raw, group.name));
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        assert.ok(res.status === 200, `${group.name}: ${res.status} ${res.text.slice(0, 300)}`);
        assert.equal(typeof res.json.message, 'string', group.name);
        if (group.name === 'push' && (example as { ref?: unknown }).ref === 'refs/heads/master') {
          masterPushes += 1;
          assert.match(res.json.message, /stale/);
        }
      }
    }
    assert.deepEqual([...statuses], [[200, total]]);
    assert.ok(masterPushes > 0, 'the examples hold pushes to master');
    assert.deepEqual(await buildShas(app.id), [], 'no example names the tip of master');

    const sha = await git.commit(app.repo, { 'c.txt': 'next\n' });
    const body = pushBody('refs/heads/master', sha);
    const res = await deliver(app.id, body, github(app.secret, body, 'push'));
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.commit_sha, sha);
  });
});
