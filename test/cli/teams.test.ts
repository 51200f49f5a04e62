// End-to-end tests of `slipway teams`, `slipway audit`, `slipway 2fa` and `slipway login` with a two-factor code, against a real server.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cli } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { base32Decode, hotp, stepAt } from '../../src/domain/totp.js';

describe('slipway teams, audit, 2fa and login with a code', () => {
  let server: TestServer;
  let home: string;
  let owner: Awaited<ReturnType<TestServer['newUser']>>;
  let dev: Awaited<ReturnType<TestServer['newUser']>>;
  const run = (args: string[], input?: string) =>
    cli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: owner.apiKey }, ...(input === undefined ? {} : { input }) });

  before(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'slipway-teams-cli-'));
    server = await startTestServer();
    owner = await server.newUser('teamcli-owner');
    dev = await server.newUser('teamcli-dev');
  });
  after(async () => {
    await server.close();
    await rm(home, { recursive: true, force: true });
  });

  test('a team is set up: create, add a member, change a role, list, a team app, the audit log', async () => {
    const created = await run(['teams', 'create', 'acme']);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /Created team acme .*owner/);
    const added = await run(['teams', 'members', 'add', 'acme', dev.email, '--role', 'developer']);
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, new RegExp(`Added ${dev.email} to acme as developer`));
    const bad = await run(['teams', 'members', 'role', 'acme', dev.email, 'admin']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /unknown role "admin"/);
    const role = await run(['teams', 'members', 'role', 'acme', dev.email, 'viewer']);
    assert.equal(role.code, 0, role.stderr);
    const members = await run(['teams', 'members', 'ls', 'acme']);
    assert.match(members.stdout, new RegExp(`${dev.email}\\s+viewer`));
    const teams = JSON.parse((await run(['teams', 'ls', '--json'])).stdout);
    assert.deepEqual(teams.map((t: { name: string; role: string }) => [t.name, t.role]), [['acme', 'owner']]);

    const app = await run(['create', '--git', 'http://127.0.0.1:9/acme-api.git', '--team', 'acme', '--no-deploy', '--json']);
    assert.equal(app.code, 0, app.stderr);
    const deployment = JSON.parse(app.stdout);
    assert.equal(deployment.team_id, teams[0].id);
    // The viewer sees the team's app, and may not delete it.
    const seen = await server.request('GET', '/api/v1/deployments', { token: dev.token });
    assert.ok(seen.json.some((d: { id: string }) => d.id === deployment.id));
    assert.equal((await server.request('DELETE', `/api/v1/deployments/${deployment.id}`, { token: dev.token })).status, 403);

    const audit = await run(['audit', '--team', 'acme', '--json']);
    assert.equal(audit.code, 0, audit.stderr);
    const actions = JSON.parse(audit.stdout).map((e: { action: string }) => e.action);
    assert.deepEqual(actions, ['deployment.create', 'team.member.role', 'team.member.add', 'team.create']);
    const table = await run(['audit', '--limit', '3']);
    assert.match(table.stdout, /team\.member\.role/);

    const refused = await run(['teams', 'rm', 'acme']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /holds 1 deployment/);
    assert.equal((await run(['teams', 'members', 'rm', 'acme', dev.email])).code, 0);
  });

  test('2fa setup, then login asks for the code (or takes --otp)', async () => {
    // Set up through the CLI: the secret is printed, the code read from stdin.
    const setupRun = cli(['2fa', 'setup'], { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: dev.apiKey }, input: '' });
    const failed = await setupRun;
    assert.notEqual(failed.code, 0, 'no code given: nothing is turned on');
    const setup = await server.request('POST', '/api/v1/users/me/2fa', { token: dev.token });
    const key = base32Decode(setup.json.secret);
    const now = stepAt(Date.now());
    assert.equal((await server.request('POST', '/api/v1/users/me/2fa/confirm', { token: dev.token, body: { code: hotp(key, now - 1) } })).status, 200);
    const status = await cli(['2fa', 'status'], { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: dev.apiKey } });
    assert.match(status.stdout, /Two-factor login is on/);

    const loginHome = await mkdtemp(path.join(os.tmpdir(), 'slipway-otp-login-'));
    try {
      const asked = await cli(['login', '--url', server.url], { home: loginHome, input: `${dev.email}\n${dev.password}\n${hotp(key, now)}\n` });
      assert.equal(asked.code, 0, asked.stderr);
      assert.match(asked.stderr, /Two-factor code: /);
      assert.match(asked.stdout, new RegExp(`Logged in to .* as ${dev.email}`));
      const flag = await cli(['login', '--url', server.url, '--otp', hotp(key, now + 1)], { home: loginHome, input: `${dev.email}\n${dev.password}\n` });
      assert.equal(flag.code, 0, flag.stderr);
      const reused = await cli(['login', '--url', server.url, '--otp', hotp(key, now + 1)], { home: loginHome, input: `${dev.email}\n${dev.password}\n` });
      assert.notEqual(reused.code, 0, 'a code works once');
      assert.match(reused.stderr, /wrong email, password or two-factor code/);
      // A wrong password is asked for a code too (the server never says which part was wrong); with
      // none given (stdin ended), the refusal stands.
      const wrong = await cli(['login', '--url', server.url], { home: loginHome, input: `${dev.email}\nnot-the-password\n` });
      assert.equal(wrong.code, 1, wrong.stderr);
      assert.match(wrong.stderr, /Two-factor code: /);
      assert.match(wrong.stderr, /error: wrong email, password or two-factor code\n$/);
    } finally {
      await rm(loginHome, { recursive: true, force: true });
    }
  });
});
