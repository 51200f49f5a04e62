// End-to-end tests of `slipway webhook` (create, show, rotate, auto_deploy) and `slipway webhook deliveries` against a real server.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cli } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('slipway webhook', () => {
  let server: TestServer;
  let home: string;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let app: { id: string; subdomain: string };
  const run = (args: string[]) => cli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey } });
  const secretIn = (text: string): string | undefined => /Secret: +(slw_wh_[0-9a-f]{64})/.exec(text)?.[1];

  /** A signed GitHub ping to the app's hook: 200 when `secret` is the current one. */
  const ping = async (secret: string): Promise<number> => {
    const body = Buffer.from('{"zen":"hi"}');
    const signature = `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;
    const res = await server.request('POST', `/api/v1/hooks/${app.id}`, {
      raw: body,
      headers: { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': signature },
    });
    return res.status;
  };

  before(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'slipway-webhook-cli-'));
    server = await startTestServer();
    user = await server.newUser('hookcli');
    const sub = `hookcli-${process.pid}`;
    const created = await server.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: sub, subdomain: sub, repo_url: 'http://127.0.0.1:9/app.git', branch: 'main' },
    });
    assert.equal(created.status, 201, created.text);
    app = { id: created.json.id, subdomain: sub };
  });
  after(async () => {
    await server.close();
    await rm(home, { recursive: true, force: true });
  });

  test('the first call creates the secret and prints it with the lines for each host; later calls do not show it; --rotate makes a new one', async () => {
    const first = await run(['webhook', app.subdomain]);
    assert.equal(first.code, 0, first.stderr);
    const url = `${server.url.replace('127.0.0.1', 'localhost')}/api/v1/hooks/${app.id}`;
    assert.ok(first.stdout.includes(`URL:     ${url}`), first.stdout);
    const secret = secretIn(first.stdout);
    assert.ok(secret !== undefined, first.stdout);
    for (const host of ['GitHub', 'Gitea / Forgejo', 'GitLab']) assert.ok(first.stdout.includes(host), host);
    assert.match(first.stdout, /Payload URL: .*\n.*application\/json/);
    assert.match(first.stdout, /auto_deploy is off/);
    assert.equal(await ping(secret), 200);

    const again = await run(['webhook', '--app', app.subdomain, '--auto-deploy', 'on']);
    assert.equal(again.code, 0, again.stderr);
    assert.ok(!again.stdout.includes(secret), 'the secret is never printed again');
    assert.match(again.stdout, /--rotate/);
    assert.doesNotMatch(again.stdout, /auto_deploy is off/);
    assert.equal((await server.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json.auto_deploy, true);
    assert.match((await run(['status', app.subdomain])).stdout, /^deploy on push: +on\b/m);
    assert.equal(await ping(secret), 200, 'showing the webhook does not rotate it');

    const rotated = await run(['webhook', app.subdomain, '--rotate', '--json']);
    assert.equal(rotated.code, 0, rotated.stderr);
    const answer = JSON.parse(rotated.stdout) as { url: string; secret: string; auto_deploy: boolean };
    assert.equal(answer.url, url);
    assert.equal(answer.auto_deploy, true);
    assert.notEqual(answer.secret, secret);
    assert.equal(await ping(secret), 401);
    assert.equal(await ping(answer.secret), 200);
  });

  test('webhook deliveries lists what was received, newest first; an archive app is refused', async () => {
    const list = await run(['webhook', 'deliveries', app.subdomain]);
    assert.equal(list.code, 0, list.stderr);
    const lines = list.stdout.trim().split('\n');
    assert.match(lines[0] ?? '', /^RECEIVED +FROM +EVENT +REF +COMMIT +OUTCOME +BUILD +REASON/);
    assert.match(lines[1] ?? '', /github +ping .*ignored +ping/);
    assert.ok(lines.some((l) => /rejected +X-Hub-Signature-256 does not match the body/.test(l)), list.stdout);
    const json = await run(['webhook', 'deliveries', '--app', app.subdomain, '--json']);
    assert.equal(json.code, 0, json.stderr);
    assert.equal((JSON.parse(json.stdout) as unknown[]).length, lines.length - 1);

    const sub = `hookcli-archive-${process.pid}`;
    await server.request('POST', '/api/v1/deployments', { token: user.token, body: { name: sub, subdomain: sub, source_type: 'archive' } });
    const refused = await run(['webhook', sub]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /archive app/);
    const none = await run(['webhook', 'deliveries', sub]);
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout, /no deliveries/);
  });
});
