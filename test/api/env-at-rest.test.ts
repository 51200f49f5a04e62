// Configuration at rest (SQLite): no value in plain text under the data directory; a wrong or lost key stops the start clearly.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/config.js';
import { createArchiveApp, deployAndWait, eventually, tarGzOf, testEngine } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
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

  test('the attack: an app prints its secret (plain, base64, URL-encoded) when its health check fails; no form is stored or answered, and every file is private', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-print-'));
    const s = await startTestServer({ SLIPWAY_DATABASE_URL: '', SLIPWAY_STARTUP_TIMEOUT_SECONDS: '15' }, dir);
    // Characters that URL encoding changes, and a length whose base64 fits on one line.
    const secret = `s3cret ${crypto.randomBytes(9).toString('hex')}/&x`;
    const forms = [secret, Buffer.from(secret).toString('base64'), Buffer.from(secret).toString('base64').replace(/=+$/, ''), encodeURIComponent(secret)];
    // The app derives the encoded forms itself: the secret is in no file it was built from.
    const print = [
      'B64=$(printf %s "$TOKEN" | base64)',
      'URL=$(printf %s "$TOKEN" | sed "s/ /%20/g; s|/|%2F|g; s/&/%26/g")',
      'echo "$TOKEN" >&2; echo "$B64" >&2; echo "$URL" >&2',
      // The last line (reported in the failure) holds all three; stdout alone, so its place is certain.
      'sleep 1; echo "token=$TOKEN b64=$B64 url=$URL"',
    ].join('; ');
    const app = async (serve: boolean): Promise<Buffer> => {
      const ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-print-app-'));
      // The failing app's last line comes a second after the rest: stdout and stderr are separate pipes,
      // and lines written within the same instant on both have no order the engine can keep.
      const run = serve ? `${print}; exec httpd -f -p "$PORT" -h /www` : `${print}; sleep 1; echo "token=$TOKEN b64=$B64 url=$URL"; exit 3`;
      fs.writeFileSync(path.join(ctx, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\nCOPY index.html /www/index.html\nCMD ${JSON.stringify(['/bin/sh', '-c', run])}\n`);
      fs.writeFileSync(path.join(ctx, 'index.html'), 'ok\n');
      try {
        return await tarGzOf(ctx);
      } finally {
        fs.rmSync(ctx, { recursive: true, force: true });
      }
    };
    const leaks = (text: string): string[] => forms.filter((form) => text.includes(form));
    try {
      await ensureBusyboxImage(testEngine());
      const user = await s.newUser('printer');
      const answers: string[] = [];
      // One app fails its health check after printing; the other prints and serves (its runtime logs are read).
      const failing = await createArchiveApp(s, user.token, await app(false));
      const serving = await createArchiveApp(s, user.token, await app(true));
      for (const { id } of [failing, serving]) {
        const set = await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body: { vars: { TOKEN: secret }, secret: true } });
        assert.equal(set.status, 200, set.text);
      }
      const failed = await deployAndWait(s, user.token, failing.id);
      assert.equal(failed.status, 500, failed.text);
      assert.equal(failed.json.error, 'build_failed');
      assert.match(failed.json.message, /token=\[redacted\] b64=\[redacted\] url=\[redacted\]/, 'the app\'s last line is reported, redacted');
      answers.push(failed.text);
      const live = await deployAndWait(s, user.token, serving.id);
      assert.equal(live.status, 200, live.text);
      for (const { id } of [failing, serving]) {
        const builds = await s.request('GET', `/api/v1/deployments/${id}/builds`, { token: user.token });
        answers.push(builds.text);
        for (const build of builds.json as { id: string }[]) {
          answers.push((await s.request('GET', `/api/v1/deployments/${id}/builds/${build.id}`, { token: user.token })).text);
          const log = await s.request('GET', `/api/v1/deployments/${id}/builds/${build.id}/logs`, { token: user.token });
          assert.match(log.text, /\[redacted\]/, 'the build log holds the app output, redacted');
          answers.push(log.text);
        }
      }
      const runtime = await eventually(async () => {
        const res = await s.request('GET', `/api/v1/deployments/${serving.id}/logs`, { token: user.token });
        return res.status === 200 && res.text.includes('url=') ? res : undefined;
      }, 60_000, 'the runtime logs');
      assert.match(runtime.text, /token=\[redacted\] b64=\[redacted\] url=\[redacted\]/);
      answers.push(runtime.text);
      for (const answer of answers) assert.deepEqual(leaks(answer), [], answer.slice(0, 2000));
      assert.ok(fs.existsSync(path.join(dir, 'slipway.db-wal')), 'the WAL is scanned while it holds the writes');
      for (const form of forms) assert.deepEqual(filesContaining(dir, form), [], form);
      // Every file Slipway keeps is its user's alone; app source trees keep their own modes inside private directories.
      const open: string[] = [];
      const walk = (d: string, rel: string[]): void => {
        const mode = fs.statSync(d).mode & 0o777;
        if (mode !== 0o700) open.push(`${d} ${mode.toString(8)}`);
        for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
          const full = path.join(d, entry.name);
          const parts = [...rel, entry.name];
          if (entry.isDirectory()) {
            if (!(parts[0] === 'uploads' && parts.length === 4 && parts[3] === 'src')) walk(full, parts);
          } else if (entry.isFile() && (fs.statSync(full).mode & 0o777) !== 0o600) open.push(`${full} ${(fs.statSync(full).mode & 0o777).toString(8)}`);
        }
      };
      walk(dir, []);
      assert.deepEqual(open, []);
      for (const name of ['slipway.db', 'slipway.db-wal', 'slipway.db-shm']) assert.equal(fs.statSync(path.join(dir, name)).mode & 0o777, 0o600, name);
    } finally {
      await s.close();
    }
    for (const form of forms) assert.deepEqual(filesContaining(dir, form), [], `${form} after close (WAL checkpointed)`);
    fs.rmSync(dir, { recursive: true, force: true });
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
