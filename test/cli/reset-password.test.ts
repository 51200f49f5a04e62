// `slipway server reset-password EMAIL` on the server host, with the server's own configuration:
// run by `npm test` on SQLite and again on PostgreSQL (SLIPWAY_TEST_DATABASE_URL).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { cli, type CliResult } from '../helpers/cli.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startTestServer, testEnv, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let home: string;
/** The environment the server runs with: the same data directory, or the same PostgreSQL database. */
let serverEnv: Record<string, string>;

function assertExit(res: CliResult, code: number): void {
  assert.equal(res.code, code, `exit ${res.code}\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`);
}

before(async () => {
  ts = await startTestServer();
  home = await mkdtemp(path.join(os.tmpdir(), 'slipway-reset-home-'));
  serverEnv = testEnv(ts.dataDir, ts.config.databaseUrl === undefined ? {} : { SLIPWAY_DATABASE_URL: ts.config.databaseUrl });
});
after(async () => {
  await ts.close();
  await rm(home, { recursive: true, force: true });
});

test('a new random password printed once; the old password and every session stop working', async () => {
  const old = await ts.request('POST', '/api/v1/auth/login', { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  assert.equal(old.status, 200);
  const res = await cli(['server', 'reset-password', ADMIN_EMAIL.toUpperCase()], { home, env: serverEnv });
  assertExit(res, 0);
  const match = /^New password \(shown only once\): (\S{20})\n$/.exec(res.stdout);
  assert.ok(match, res.stdout);
  const where = ts.config.databaseUrl === undefined ? ts.dataDir : 'the PostgreSQL database';
  assert.equal(res.stderr, `The password of ${ADMIN_EMAIL} (in ${where}) was reset; its sessions are logged out (API keys keep working).\n`);
  assert.equal((await ts.request('GET', '/api/v1/users/me', { token: old.json.token })).status, 401);
  assert.equal((await ts.request('GET', '/api/v1/users/me', { token: ts.adminToken })).status, 401);
  assert.equal((await ts.request('POST', '/api/v1/auth/login', { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } })).status, 401);
  assert.equal((await ts.request('POST', '/api/v1/auth/login', { body: { email: ADMIN_EMAIL, password: match[1] } })).status, 200);
});

test('--password-stdin takes the password from stdin and prints none', async () => {
  const res = await cli(['server', 'reset-password', ADMIN_EMAIL, '--password-stdin'], { home, env: serverEnv, input: 'chosen-password-1\n' });
  assertExit(res, 0);
  assert.equal(res.stdout, '');
  assert.equal((await ts.request('POST', '/api/v1/auth/login', { body: { email: ADMIN_EMAIL, password: 'chosen-password-1' } })).status, 200);
  const short = await cli(['server', 'reset-password', ADMIN_EMAIL, '--password-stdin'], { home, env: serverEnv, input: 'short\n' });
  assertExit(short, 1);
  assert.match(short.stderr, /^error: .*8 characters.*\n$/);
});

test('an unknown e-mail changes nothing and says so', async () => {
  const res = await cli(['server', 'reset-password', 'nobody@test.local'], { home, env: serverEnv });
  assertExit(res, 1);
  assert.equal(res.stdout, '');
  assert.equal(res.stderr, 'error: no user has the e-mail nobody@test.local\n');
});
