// End-to-end tests of `slipway domains` (list, add, rm) against a real server.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cli } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('slipway domains', () => {
  let server: TestServer;
  let home: string;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let app: { id: string; subdomain: string };
  const run = (args: string[]) => cli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey } });
  const hostnames = async (): Promise<string[]> =>
    (await server.request('GET', `/api/v1/deployments/${app.id}/domains`, { token: user.token })).json.map((d: { hostname: string }) => d.hostname);

  before(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'slipway-domains-cli-'));
    server = await startTestServer();
    user = await server.newUser('domcli');
    const sub = `domcli-${process.pid}`;
    const created = await server.request('POST', '/api/v1/deployments', { token: user.token, body: { name: sub, subdomain: sub, source_type: 'archive' } });
    app = { id: created.json.id, subdomain: sub };
  });
  after(async () => {
    await server.close();
    await rm(home, { recursive: true, force: true });
  });

  test('add, list and rm a domain (IDN given in Unicode, removed by either form)', async () => {
    const empty = await run(['domains', app.subdomain]);
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stdout, /no custom domains/);

    const added = await run(['domains', 'add', '--app', app.subdomain, `WWW-${process.pid}.Example.com`]);
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, new RegExp(`www-${process.pid}\\.example\\.com now reaches`));
    const idn = await run(['domains', 'add', `bücher-${process.pid}.example`, '--app', app.subdomain]);
    assert.equal(idn.code, 0, idn.stderr);
    assert.equal((await hostnames()).length, 2);

    const listed = await run(['domains', app.subdomain]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^HOSTNAME\s+TLS\s+EXPIRES\s+ADDED/);
    assert.match(listed.stdout, new RegExp(`www-${process.pid}\\.example\\.com\\s+off`));
    const ls = await run(['domains', 'ls', '--app', app.subdomain]);
    assert.equal(ls.code, 0, ls.stderr);
    assert.equal(ls.stdout.split('\n')[0], listed.stdout.split('\n')[0]);
    assert.deepEqual(JSON.parse((await run(['domains', 'ls', app.subdomain, '--json'])).stdout), JSON.parse((await run(['domains', app.subdomain, '--json'])).stdout), '`domains ls` is `domains APP`');
    const json = await run(['domains', app.subdomain, '--json']);
    assert.deepEqual(JSON.parse(json.stdout).map((d: { hostname: string }) => d.hostname), await hostnames());

    const bad = await run(['domains', 'add', '--app', app.subdomain, '10.0.0.1']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /IP address/);

    const removed = await run(['domains', 'rm', '--app', app.subdomain, `bücher-${process.pid}.example`]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual(await hostnames(), [`www-${process.pid}.example.com`]);
    const missing = await run(['domains', 'rm', '--app', app.subdomain, 'nothing.example.com']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /no custom domain nothing\.example\.com/);
    assert.equal((await run(['domains', 'rm', '--app', app.subdomain, `www-${process.pid}.example.com`])).code, 0);
    assert.deepEqual(await hostnames(), []);
  });
});
