// Configuration at rest (SQLite): no value in plain text under the data directory; a wrong or lost key stops the start clearly.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/config.js';
import { filesContaining } from '../helpers/files.js';
import { execFile } from 'node:child_process';
import { PROJECT_ROOT, spawnServerProcess, startTestServer, testEnv } from '../helpers/server.js';

/** Runs `slipway server rotate-key` with `env`; resolves with its exit code and output. */
function rotateKey(env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(PROJECT_ROOT, 'bin', 'slipway.js'), 'server', 'rotate-key'],
      { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: os.tmpdir(), ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr }),
    );
  });
}

describe('configuration at rest', () => {
  test('no variable value, secret or not, appears in any file under the data directory (database and WAL included)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-rest-'));
    const s = await startTestServer({ SLIPWAY_DATABASE_URL: '' }, dir);
    const secret = `secret-${crypto.randomBytes(12).toString('hex')}`;
    const plain = `plain-${crypto.randomBytes(12).toString('hex')}`;
    try {
      const user = await s.newUser('rest');
      const dep = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'rest', subdomain: `rest-${process.pid}`, source_type: 'archive' } });
      const id = dep.json.id as string;
      assert.equal((await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { TOKEN: secret }, secret: true } })).status, 200);
      assert.equal((await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { PLAIN: plain } } })).status, 200);
      // Overwritten and removed values leave no trace either.
      const old = `old-${crypto.randomBytes(12).toString('hex')}`;
      await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { OLD: old } } });
      await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { OLD: null } } });
      assert.ok(fs.existsSync(path.join(dir, 'slipway.db-wal')), 'the WAL is scanned while it holds the writes');
      for (const value of [secret, plain, old]) assert.deepEqual(filesContaining(dir, value), [], value);
      // The key file exists with mode 0600 and the test can still read the values back through the API.
      assert.equal(fs.statSync(path.join(dir, 'secret.key')).mode & 0o777, 0o600);
      assert.equal((await s.request('GET', `/api/v1/deployments/${id}/env`, { token: user.token })).json.vars.find((v: { key: string }) => v.key === 'PLAIN').value, plain);
    } finally {
      await s.close();
    }
    for (const value of [secret, plain]) assert.deepEqual(filesContaining(dir, value), [], `${value} after close (WAL checkpointed)`);
  });

  test('a start with a key that does not open the stored configuration fails with a clear message', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-key-'));
    const key = crypto.randomBytes(32).toString('base64');
    const first = await startTestServer({ SLIPWAY_DATABASE_URL: '', SLIPWAY_SECRET_KEY: key }, dir);
    await first.close();
    assert.ok(!fs.existsSync(path.join(dir, 'secret.key')), 'with SLIPWAY_SECRET_KEY no key file is written');
    // In process: a ConfigError naming the variable.
    await assert.rejects(
      startTestServer({ SLIPWAY_DATABASE_URL: '', SLIPWAY_SECRET_KEY: crypto.randomBytes(32).toString('base64') }, dir),
      (err: unknown) => err instanceof ConfigError && /SLIPWAY_SECRET_KEY is not the key/.test(err.message),
    );
    // As the operator sees it: `slipway server` says why and exits.
    const env = { ...testEnv(dir), SLIPWAY_PORT: '0' };
    await assert.rejects(spawnServerProcess(env), (err: unknown) => err instanceof Error && /cannot start: the installation key .*secret\.key is missing/.test(err.message));
    await assert.rejects(
      spawnServerProcess({ ...env, SLIPWAY_SECRET_KEY: 'too-short' }),
      (err: unknown) => err instanceof Error && /configuration error: SLIPWAY_SECRET_KEY must be 32 random bytes in base64/.test(err.message),
    );
    // The right key still opens it.
    const again = await startTestServer({ SLIPWAY_DATABASE_URL: '', SLIPWAY_SECRET_KEY: key }, dir);
    await again.close();
  });

  test('`slipway server rotate-key` re-encrypts under a new key file; the server then starts with it and reads the values', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-rotate-'));
    const first = await startTestServer({ SLIPWAY_DATABASE_URL: '' }, dir);
    const user = await first.newUser('rotate');
    const dep = await first.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'r', subdomain: `rot-${process.pid}`, source_type: 'archive' } });
    const id = dep.json.id as string;
    await first.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { A: 'alpha', B: 'beta' } } });
    await first.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { S: 'sigma' }, secret: true } });
    await first.close();
    const before = fs.readFileSync(path.join(dir, 'secret.key'), 'utf8');
    const env = testEnv(dir);
    const rotated = await rotateKey(env);
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.match(rotated.stdout, /^Re-encrypted 3 values under the new key: .*secret\.key holds the new key\.$/m);
    assert.ok(!/alpha|beta|sigma/.test(rotated.stdout + rotated.stderr), 'no value is printed');
    assert.notEqual(fs.readFileSync(path.join(dir, 'secret.key'), 'utf8'), before);
    assert.equal(fs.statSync(path.join(dir, 'secret.key')).mode & 0o777, 0o600);
    const second = await startTestServer({ SLIPWAY_DATABASE_URL: '' }, dir);
    try {
      const token = (await second.request('POST', '/api/v1/auth/login', { body: { email: user.email, password: user.password } })).json.token;
      const vars = (await second.request('GET', `/api/v1/deployments/${id}/env`, { token })).json.vars;
      assert.deepEqual(vars.map((v: { key: string; value: string | null }) => [v.key, v.value]), [['A', 'alpha'], ['B', 'beta'], ['S', null]]);
    } finally {
      await second.close();
    }
    // With SLIPWAY_SECRET_KEY the new key must be given; the command says how.
    const envKey = crypto.randomBytes(32).toString('base64');
    const dir2 = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-rotate-'));
    await (await startTestServer({ SLIPWAY_DATABASE_URL: '', SLIPWAY_SECRET_KEY: envKey }, dir2)).close();
    const refused = await rotateKey({ ...testEnv(dir2), SLIPWAY_SECRET_KEY: envKey });
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /cannot rotate the key: the key is SLIPWAY_SECRET_KEY: set SLIPWAY_NEW_SECRET_KEY/);
    const next = crypto.randomBytes(32).toString('base64');
    const done = await rotateKey({ ...testEnv(dir2), SLIPWAY_SECRET_KEY: envKey, SLIPWAY_NEW_SECRET_KEY: next });
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /set SLIPWAY_SECRET_KEY to the value of SLIPWAY_NEW_SECRET_KEY before the next start/);
    await (await startTestServer({ SLIPWAY_DATABASE_URL: '', SLIPWAY_SECRET_KEY: next }, dir2)).close();
  });
});
