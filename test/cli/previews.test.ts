// End-to-end tests of `slipway previews` (list, enable, disable, delete) against a real server, with previews made by signed pull request deliveries.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cli } from '../helpers/cli.js';
import { pullRequestBody, pullRequestHeaders } from '../helpers/pull-requests.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('slipway previews', () => {
  let server: TestServer;
  let home: string;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let app: { id: string; subdomain: string; secret: string };
  const run = (args: string[]) => cli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey } });

  before(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'slipway-previews-cli-'));
    server = await startTestServer();
    user = await server.newUser('pvcli');
    const sub = `pvcli-${process.pid}`;
    // A repository that does not exist: preview builds fail at the fetch, which is all this needs.
    const created = await server.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: sub, subdomain: sub, repo_url: 'http://127.0.0.1:9/app.git', branch: 'main' },
    });
    assert.equal(created.status, 201, created.text);
    const hook = await server.request('POST', `/api/v1/deployments/${created.json.id}/webhook`, { token: user.token });
    app = { id: created.json.id, subdomain: sub, secret: hook.json.secret };
  });
  after(async () => {
    await server.close();
    await rm(home, { recursive: true, force: true });
  });

  const open = async (number: number): Promise<number> => {
    const body = pullRequestBody('github', { action: 'opened', number, headSha: crypto.randomBytes(20).toString('hex'), headBranch: `topic-${number}` });
    return (await server.request('POST', `/api/v1/hooks/${app.id}`, { raw: body, headers: pullRequestHeaders('github', app.secret, body) })).status;
  };

  test('enable, list (table and JSON), delete, disable; status shows the setting', async () => {
    const none = await run(['previews', app.subdomain]);
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout, /no previews: previews are off/);
    assert.equal(await open(4), 200, 'previews off: nothing built');

    const on = await run(['previews', 'enable', app.subdomain]);
    assert.equal(on.code, 0, on.stderr);
    assert.match(on.stdout, /Previews of .* are on/);
    assert.equal((await server.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json.previews, true);
    assert.match((await run(['status', app.subdomain])).stdout, /^previews: +on\b/m);

    assert.equal(await open(4), 202);
    assert.equal(await open(5), 202);
    const table = await run(['previews', '--app', app.subdomain]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /#5 .*topic-5/);
    assert.match(table.stdout, /#4 .*topic-4/);
    assert.ok(table.stdout.includes(`${app.subdomain}-pr-4.localhost`), table.stdout);
    const json = await run(['previews', app.subdomain, '--json']);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual((JSON.parse(json.stdout) as Array<{ number: number }>).map((p) => p.number), [5, 4]);

    const removed = await run(['previews', 'delete', '4', app.subdomain]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /#4 .*removed/);
    assert.equal((await server.request('GET', `/api/v1/deployments/${app.id}/previews/4`, { token: user.token })).status, 404);
    const missing = await run(['previews', 'rm', '4', app.subdomain]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /not found/);
    const bad = await run(['previews', 'delete', 'four', app.subdomain]);
    assert.notEqual(bad.code, 0);

    const off = await run(['previews', 'disable', app.subdomain]);
    assert.equal(off.code, 0, off.stderr);
    assert.match(off.stdout, /are off/);
    const left = await run(['previews', app.subdomain]);
    assert.match(left.stdout, /#5/);
    assert.match(left.stdout, /Previews are off/);
  });

  test('an archive app is refused', async () => {
    const sub = `pvcli-archive-${process.pid}`;
    const created = await server.request('POST', '/api/v1/deployments', { token: user.token, body: { name: sub, subdomain: sub, source_type: 'archive' } });
    assert.equal(created.status, 201, created.text);
    const res = await run(['previews', sub]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /archive app/);
  });
});
