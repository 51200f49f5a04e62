// API tests: auto_deploy, webhook secrets, and every answer of POST /api/v1/hooks/{id} (decisions §10), with real HMACs over raw bytes and a real git server.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

type User = Awaited<ReturnType<TestServer['newUser']>>;

/** A commit id that exists nowhere: never the tip of a branch. */
const randomSha = (): string => crypto.randomBytes(20).toString('hex');

/** A GitHub-shaped push event body. */
function pushBody(ref: string, after: string): Buffer {
  return Buffer.from(JSON.stringify({ ref, before: '0'.repeat(40), after, repository: { full_name: 'o/r' }, pusher: { name: 'p' } }));
}

const hmacHex = (secret: string, body: Buffer): string => crypto.createHmac('sha256', secret).update(body).digest('hex');

/** Headers of a signed delivery as each provider sends them. */
function signed(provider: 'github' | 'gitea' | 'gitlab', secret: string, body: Buffer, event: string, delivery: string = crypto.randomUUID()): Record<string, string> {
  switch (provider) {
    case 'github':
      return { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': delivery, 'x-hub-signature-256': `sha256=${hmacHex(secret, body)}` };
    case 'gitea':
      // Gitea and Forgejo also send GitHub's headers; their own come first.
      return {
        'content-type': 'application/json',
        'x-gitea-event': event,
        'x-gitea-delivery': delivery,
        'x-gitea-signature': hmacHex(secret, body),
        'x-github-event': event,
        'x-github-delivery': delivery,
      };
    case 'gitlab':
      return { 'content-type': 'application/json', 'x-gitlab-event': event, 'x-gitlab-event-uuid': delivery, 'x-gitlab-token': secret };
  }
}

describe('deploy on push: webhooks', () => {
  let s: TestServer;
  let git: GitServer;
  let user: User;

  before(async () => {
    git = await startGitServer();
    s = await startTestServer();
    user = await s.newUser('hooks');
  });
  after(async () => {
    await s.close();
    await git.close();
  });

  let counter = 0;
  /** The repository of the newest {@link gitDeployment}: commits to it are what pushes deliver. */
  let repo = '';
  /**
   * A git deployment of a new repository on the local git server, holding no Dockerfile (its builds
   * fail after the fetch, without Docker).
   */
  async function gitDeployment(extra: Record<string, unknown> = {}): Promise<string> {
    counter += 1;
    repo = `hooks-${counter}`;
    const branch = typeof extra['branch'] === 'string' ? extra['branch'] : 'main';
    const { url } = await git.createRepo(repo, { 'README.md': 'no Dockerfile here\n' }, { branch });
    const res = await s.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: `hook app ${counter}`, subdomain: `hook-${process.pid}-${counter}`, repo_url: url, branch: 'main', ...extra },
    });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  }

  /** A new commit on the newest deployment's repository (its tracked branch unless told), pushed; its sha. */
  const commit = (branch?: string): Promise<string> => git.commit(repo, { 'README.md': `change ${crypto.randomUUID()}\n` }, branch === undefined ? {} : { branch });

  async function createHook(id: string): Promise<{ url: string; secret: string }> {
    const res = await s.request('POST', `/api/v1/deployments/${id}/webhook`, { token: user.token });
    assert.equal(res.status, 201, res.text);
    return res.json;
  }

  const deliver = (id: string, raw: Buffer, headers: Record<string, string>): Promise<HttpResult> =>
    s.request('POST', `/api/v1/hooks/${id}`, { raw, headers });

  const builds = async (id: string): Promise<Array<{ id: string; commit_sha: string }>> =>
    (await s.request('GET', `/api/v1/deployments/${id}/builds`, { token: user.token })).json;

  const deliveries = async (id: string): Promise<Array<Record<string, unknown>>> => {
    const res = await s.request('GET', `/api/v1/deployments/${id}/webhook/deliveries`, { token: user.token });
    assert.equal(res.status, 200, res.text);
    return res.json;
  };

  test('auto_deploy: false by default, set on create and PATCH, shown; true on an archive deployment is a validation_error', async () => {
    const off = await gitDeployment();
    assert.equal((await s.request('GET', `/api/v1/deployments/${off}`, { token: user.token })).json.auto_deploy, false);
    const on = await gitDeployment({ auto_deploy: true });
    assert.equal((await s.request('GET', `/api/v1/deployments/${on}`, { token: user.token })).json.auto_deploy, true);
    const patched = await s.request('PATCH', `/api/v1/deployments/${off}`, { token: user.token, body: { auto_deploy: true } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.auto_deploy, true);
    const listed = (await s.request('GET', '/api/v1/deployments', { token: user.token })).json as Array<{ id: string; auto_deploy: boolean }>;
    assert.equal(listed.find((d) => d.id === off)?.auto_deploy, true);
    assertError(await s.request('PATCH', `/api/v1/deployments/${off}`, { token: user.token, body: { auto_deploy: 'yes' } }), 400, 'validation_error');

    const body = { name: 'archive', subdomain: `hook-archive-${process.pid}`, source_type: 'archive' };
    assertError(await s.request('POST', '/api/v1/deployments', { token: user.token, body: { ...body, auto_deploy: true } }), 400, 'validation_error');
    const archive = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { ...body, auto_deploy: false } });
    assert.equal(archive.status, 201, archive.text);
    assertError(await s.request('PATCH', `/api/v1/deployments/${archive.json.id}`, { token: user.token, body: { auto_deploy: true } }), 400, 'validation_error');
    assertError(await s.request('POST', `/api/v1/deployments/${archive.json.id}/webhook`, { token: user.token }), 400, 'validation_error');
    assertError(await s.request('GET', `/api/v1/deployments/${archive.json.id}/webhook`, { token: user.token }), 400, 'validation_error');
  });

  test('POST …/webhook answers 201 {url, secret}; calling again rotates; the secret is never shown again', async () => {
    const id = await gitDeployment();
    const none = await s.request('GET', `/api/v1/deployments/${id}/webhook`, { token: user.token });
    assert.equal(none.status, 200);
    assert.equal(none.json.configured, false);
    const first = await createHook(id);
    assert.deepEqual(Object.keys(first).sort(), ['secret', 'url']);
    assert.equal(first.url, `http://localhost:${s.port}/api/v1/hooks/${id}`);
    assert.ok(first.secret.length >= 40);
    const shown = await s.request('GET', `/api/v1/deployments/${id}/webhook`, { token: user.token });
    assert.equal(shown.json.configured, true);
    assert.equal(shown.json.url, first.url);
    assert.ok(!shown.text.includes(first.secret));
    for (const p of [`/api/v1/deployments/${id}`, '/api/v1/deployments', `/api/v1/deployments/${id}/webhook/deliveries`]) {
      assert.ok(!(await s.request('GET', p, { token: user.token })).text.includes(first.secret), p);
    }

    const ping = Buffer.from('{"zen":"hi"}');
    assert.equal((await deliver(id, ping, signed('github', first.secret, ping, 'ping'))).status, 200);
    const second = await createHook(id);
    assert.notEqual(second.secret, first.secret);
    assertError(await deliver(id, ping, signed('github', first.secret, ping, 'ping')), 401, 'unauthorized', 'the rotated-out secret');
    assert.equal((await deliver(id, ping, signed('github', second.secret, ping, 'ping'))).status, 200);
  });

  test('the hook answers 404 for a non-UUID, an unknown deployment, and a deployment without a webhook', async () => {
    const body = Buffer.from('{}');
    const headers = signed('github', 'x', body, 'ping');
    const id = await gitDeployment();
    const answers = [];
    for (const target of ['not-a-uuid', crypto.randomUUID(), id, 'x'.repeat(2000)]) {
      const res = await deliver(target, body, headers);
      assertError(res, 404, 'not_found', target.slice(0, 40));
      answers.push(res.json);
    }
    assert.equal(new Set(answers.map((a) => JSON.stringify(a))).size, 1, 'one answer for all');
  });

  test('signatures: each provider over the raw bytes; missing or wrong → 401 and recorded as rejected', async () => {
    const id = await gitDeployment();
    const { secret } = await createHook(id);
    // Bytes that would not survive re-serialization: spacing, key order, escaped unicode.
    const raw = Buffer.from('{ "zen" :"\\u00e9t\\u00e9",  "hook_id": 1 }\n');
    for (const provider of ['github', 'gitea', 'gitlab'] as const) {
      const res = await deliver(id, raw, signed(provider, secret, raw, provider === 'gitlab' ? 'Note Hook' : 'issues'));
      assert.equal(res.status, 200, `${provider}: ${res.text}`);
      assert.match(res.json.message, /not a push/);
    }
    const reserialized = Buffer.from(JSON.stringify(JSON.parse(raw.toString())));
    const cases: Array<[string, Record<string, string>]> = [
      ['no signature', { 'content-type': 'application/json', 'x-github-event': 'ping' }],
      ['github, other secret', signed('github', 'another-secret', raw, 'ping')],
      ['github, signature of the re-serialized JSON', { ...signed('github', secret, reserialized, 'ping') }],
      ['github, hex without sha256=', { ...signed('github', secret, raw, 'ping'), 'x-hub-signature-256': hmacHex(secret, raw) }],
      ['github, sha1 header only', { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-hub-signature': `sha1=${crypto.createHmac('sha1', secret).update(raw).digest('hex')}` }],
      ['gitea, other secret', signed('gitea', 'another-secret', raw, 'push')],
      ['gitlab, other token', signed('gitlab', `${secret}x`, raw, 'Push Hook')],
      ['gitlab, no token', { 'content-type': 'application/json', 'x-gitlab-event': 'Push Hook' }],
    ];
    for (const [what, headers] of cases) {
      const res = await deliver(id, raw, headers);
      assertError(res, 401, 'unauthorized', what);
      assert.ok(!res.text.includes(secret));
      assert.equal(res.headers.get('www-authenticate'), null, 'a hook takes no bearer');
    }
    const recorded = await deliveries(id);
    assert.equal(recorded.filter((d) => d.outcome === 'rejected').length, cases.length);
    assert.equal(recorded.filter((d) => d.outcome === 'ignored').length, 3);
    assert.equal(recorded[0]?.provider, 'gitlab', 'newest first');
  });

  test('pushes: other branch, tag, deletion, auto_deploy off → 200 and no build; the tracked branch → 202 with exactly `after`', async () => {
    const id = await gitDeployment();
    const { secret } = await createHook(id);
    const push = async (provider: 'github' | 'gitea' | 'gitlab', ref: string, after: string, delivery?: string): Promise<HttpResult> => {
      const body = pushBody(ref, after);
      return deliver(id, body, signed(provider, secret, body, provider === 'gitlab' ? 'Push Hook' : 'push', delivery));
    };
    const off = await push('github', 'refs/heads/main', randomSha());
    assert.equal(off.status, 200, off.text);
    assert.match(off.json.message, /auto_deploy is off/);
    await s.request('PATCH', `/api/v1/deployments/${id}`, { token: user.token, body: { auto_deploy: true } });
    for (const [what, res] of [
      ['other branch', await push('github', 'refs/heads/feature', randomSha())],
      ['tag', await push('gitea', 'refs/tags/v1.0.0', randomSha())],
      ['deletion', await push('github', 'refs/heads/main', '0'.repeat(40))],
      ['gitlab tag', await push('gitlab', 'refs/tags/v2', randomSha())],
    ] as const) {
      assert.equal(res.status, 200, `${what}: ${res.text}`);
      assert.deepEqual(Object.keys(res.json), ['message'], what);
    }
    assert.deepEqual(await builds(id), []);

    for (const provider of ['github', 'gitea', 'gitlab'] as const) {
      const sha = await commit();
      const res = await push(provider, 'refs/heads/main', sha);
      assert.equal(res.status, 202, `${provider}: ${res.text}`);
      assert.equal(res.json.commit_sha, sha);
      assert.equal(res.json.status, 'building');
      assert.equal(res.json.deployment_id, id);
      assert.equal((await builds(id))[0]?.id, res.json.id);
    }
    assert.equal((await builds(id)).length, 3);
    const recorded = await deliveries(id);
    assert.deepEqual(
      recorded.map((d) => d.outcome),
      ['deployed', 'deployed', 'deployed', 'ignored', 'ignored', 'ignored', 'ignored', 'ignored'],
    );
    assert.equal(recorded[0]?.provider, 'gitlab');
    assert.equal(recorded[0]?.ref, 'refs/heads/main');
    assert.equal(recorded[0]?.build_id, (await builds(id))[0]?.id);
    assert.match(String(recorded[6]?.reason), /not the tracked branch main/);
  });

  test('the same delivery id again → 200 and no second build; malformed JSON with a valid signature → 400', async () => {
    const id = await gitDeployment({ auto_deploy: true });
    const { secret } = await createHook(id);
    const body = pushBody('refs/heads/main', await commit());
    const headers = signed('github', secret, body, 'push');
    const first = await deliver(id, body, headers);
    assert.equal(first.status, 202, first.text);
    // Twice at once, then once more: none of them builds again.
    const repeats = await Promise.all([deliver(id, body, headers), deliver(id, body, headers)]);
    repeats.push(await deliver(id, body, headers));
    for (const res of repeats) {
      assert.equal(res.status, 200, res.text);
      assert.match(res.json.message, /already received/);
    }
    assert.equal((await builds(id)).length, 1);
    // A new delivery id of the same push is a replay: the commit was already deployed (decisions §10, 2026-11-25).
    const replay = await deliver(id, body, signed('github', secret, body, 'push'));
    assert.equal(replay.status, 200, replay.text);
    assert.match(replay.json.message, /stale.*already deployed/);
    assert.equal((await builds(id)).length, 1);
    // The next push deploys.
    const next = pushBody('refs/heads/main', await commit());
    assert.equal((await deliver(id, next, signed('github', secret, next, 'push'))).status, 202);
    assert.equal((await builds(id)).length, 2);

    const bad = Buffer.from('{"ref": "refs/heads/main", ');
    assertError(await deliver(id, bad, signed('github', secret, bad, 'push')), 400, 'validation_error', 'malformed JSON');
    const noAfter = Buffer.from('{"ref": "refs/heads/main"}');
    assertError(await deliver(id, noAfter, signed('gitea', secret, noAfter, 'push')), 400, 'validation_error', 'no after');
    assert.equal((await builds(id)).length, 2);
  });

  test('no branch set: the default branch is read from the remote; a remote that cannot be read → 409 and no build', async () => {
    const id = await gitDeployment({ branch: undefined, auto_deploy: true, repo_url: 'http://127.0.0.1:9/none.git' });
    const { secret } = await createHook(id);
    const body = pushBody('refs/heads/main', randomSha());
    assertError(await deliver(id, body, signed('github', secret, body, 'push')), 409, 'invalid_state');
    assert.deepEqual(await builds(id), []);
    const [recorded] = await deliveries(id);
    assert.equal(recorded?.outcome, 'rejected');
    assert.match(String(recorded?.reason), /default branch/);
  });

  test("GitHub's form-encoded payload= deliveries are verified over the form bytes; other media types → 415; over 1 MiB → 413", async () => {
    const id = await gitDeployment({ auto_deploy: true });
    const { secret } = await createHook(id);
    const sha = await commit();
    const form = Buffer.from(new URLSearchParams({ payload: pushBody('refs/heads/main', sha).toString() }).toString());
    const headers = { ...signed('github', secret, form, 'push'), 'content-type': 'application/x-www-form-urlencoded' };
    const res = await deliver(id, form, headers);
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.commit_sha, sha);

    const text = Buffer.from('hello');
    assertError(await deliver(id, text, { ...signed('github', secret, text, 'ping'), 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
    const big = Buffer.from(JSON.stringify({ zen: 'x'.repeat(1024 * 1024) }));
    assertError(await deliver(id, big, signed('github', secret, big, 'ping')), 413, 'payload_too_large');
    const exactly = Buffer.from(`{"zen":"${'x'.repeat(1024 * 1024 - 10)}"}`);
    assert.equal(exactly.length, 1024 * 1024);
    assert.equal((await deliver(id, exactly, signed('github', secret, exactly, 'ping'))).status, 200, '1 MiB exactly is accepted');
  });

  test('only badly signed deliveries count toward the limit: 60 a minute, then 429 with Retry-After; signed ones still answered, a push still deploys', async () => {
    const id = await gitDeployment({ auto_deploy: true });
    const { secret } = await createHook(id);
    const ping = Buffer.from('{}');
    for (let i = 0; i < 100; i += 1) assert.equal((await deliver(id, ping, signed('github', secret, ping, 'ping'))).status, 200, 'signed deliveries are never limited');
    for (let i = 0; i < 60; i += 1) assertError(await deliver(id, ping, signed('github', 'wrong', ping, 'ping')), 401, 'unauthorized');
    const limited = await deliver(id, ping, signed('github', 'wrong', ping, 'ping'));
    assertError(limited, 429, 'rate_limited');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    // The sender with the secret is not locked out by the forger.
    assert.equal((await deliver(id, ping, signed('github', secret, ping, 'ping'))).status, 200);
    const body = pushBody('refs/heads/main', await commit());
    const pushed = await deliver(id, body, signed('github', secret, body, 'push'));
    assert.equal(pushed.status, 202, pushed.text);
    // Another webhook is not affected.
    const other = await gitDeployment();
    const hook = await createHook(other);
    assert.equal((await deliver(other, ping, signed('github', hook.secret, ping, 'ping'))).status, 200);
    assertError(await deliver(other, ping, signed('github', 'wrong', ping, 'ping')), 401, 'unauthorized');

    const recorded = await deliveries(id);
    assert.equal(recorded.filter((d) => d.outcome === 'rejected').length, 20, 'at most 20 rejected deliveries are kept');
    // The list is the newest 100: the 20 rejected ones kept, and the 80 newest real ones (forgeries pushed none out).
    assert.equal(recorded.filter((d) => d.outcome !== 'rejected').length, 80, 'forged deliveries did not push the real ones out');
    assert.equal(recorded[0]?.outcome, 'deployed');
  });

  test('a webhook secret is not stored in plain text under the data directory', async () => {
    const id = await gitDeployment();
    const { secret } = await createHook(id);
    const hex = secret.replace(/^slw_wh_/, '');
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (entry.isFile()) files.push(full);
      }
    };
    walk(s.dataDir);
    assert.ok(files.some((f) => f.endsWith('slipway.db')) || s.config.databaseUrl !== undefined);
    for (const file of files) {
      const content = fs.readFileSync(file);
      assert.ok(!content.includes(hex) && !content.includes(Buffer.from(hex, 'hex')), `${file} holds the secret`);
    }
  });
});
