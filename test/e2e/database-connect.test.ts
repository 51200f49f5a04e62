// End-to-end: `slipway db connect`'s listener carries a client's connection through the API's WebSocket to a database that publishes no port; refusals say why.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { runDbConnect } from '../../src/cli/db-connect.js';
import { eventually } from '../helpers/apps.js';
import { STAND_IN_IMAGES, waitForStatus } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Opens `port` on loopback, writes `text`, and reads until `until` matches (or the connection ends), within 20 s. */
function talk(port: number, text: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(got);
    }, 20_000);
    socket.on('connect', () => socket.write(text));
    socket.on('data', (chunk: Buffer) => {
      got += chunk.toString();
      if (until.test(got)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(got);
    });
    socket.on('error', reject);
  });
}

/** Runs the host's psql against `port` on loopback with `sql`, piping `input` in; resolves with the number of bytes it printed, their SHA-256 and their last 200 characters (no 100 MiB string is held). */
function hostPsql(port: number, creds: { username: string; password: string; database: string }, sql: string, input?: () => AsyncIterable<Buffer>): Promise<{ bytes: number; sha256: string; tail: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', creds.username, '-d', creds.database, '-v', 'ON_ERROR_STOP=1', '-Atc', sql], {
      env: { ...process.env, PGPASSWORD: creds.password, PGCONNECT_TIMEOUT: '20' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let bytes = 0;
    let tail = '';
    let err = '';
    const hash = createHash('sha256');
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      hash.update(chunk);
      tail = (tail + chunk.toString()).slice(-200);
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve({ bytes, sha256: hash.digest('hex'), tail }) : reject(new Error(`psql exited with ${code}: ${err}`))));
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.on('close', () => clearTimeout(timer));
    if (input === undefined) child.stdin.end();
    else {
      void (async () => {
        for await (const chunk of input()) if (!child.stdin.write(chunk)) await new Promise((r) => child.stdin.once('drain', r));
        child.stdin.end();
      })().catch(reject);
    }
  });
}

describe('slipway db connect', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let other: Awaited<ReturnType<TestServer['newUser']>>;
  let id: string;

  before(async () => {
    s = await startTestServer(STAND_IN_IMAGES);
    user = await s.newUser('connect');
    other = await s.newUser('outsider');
    const created = await s.request('POST', '/api/v1/databases', { token: user.token, body: { name: 'cache', engine: 'redis' } });
    assert.equal(created.status, 201, created.text);
    id = created.json.id;
    assert.equal((await waitForStatus(s, user.token, id)).status, 'running');
  });
  after(async () => {
    await s?.close();
  });

  const listen = async (bearer: string, problems: string[]): Promise<{ port: number; stop: () => Promise<void> }> => {
    const controller = new AbortController();
    let port = 0;
    let listening!: () => void;
    const up = new Promise<void>((resolve) => (listening = resolve));
    const done = runDbConnect({ serverUrl: s.url, bearer, databaseId: id, port: 0, signal: controller.signal, onListening: (p) => { port = p; listening(); }, onProblem: (m) => problems.push(m) });
    await up;
    return { port, stop: async () => { controller.abort(); await done; } };
  };

  test('a redis client on this machine reaches the database through the API, and closing the listener ends it', async () => {
    const creds = (await s.request('GET', `/api/v1/databases/${id}/credentials`, { token: user.token })).json;
    const problems: string[] = [];
    const { port, stop } = await listen(user.apiKey, problems);
    const answer = await talk(port, `AUTH default ${creds.password}\r\nSET greeting hello\r\nGET greeting\r\n`, /hello\r\n$/);
    assert.equal(answer, '+OK\r\n+OK\r\n$5\r\nhello\r\n', problems.join('; '));
    await stop();
    await assert.rejects(talk(port, 'PING\r\n', /PONG/), /ECONNREFUSED/);
  });

  test('revoking the key ends an open connection at once, and the CLI says why', async () => {
    const creds = (await s.request('GET', `/api/v1/databases/${id}/credentials`, { token: user.token })).json;
    const key = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: 'short-lived' } });
    assert.equal(key.status, 201, key.text);
    const problems: string[] = [];
    const { port, stop } = await listen(key.json.key, problems);
    try {
      const socket = net.connect(port, '127.0.0.1');
      let got = '';
      socket.on('data', (chunk: Buffer) => (got += chunk.toString()));
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.on('error', () => undefined);
      socket.write(`AUTH default ${creds.password}\r\nPING\r\n`);
      const deadline = Date.now() + 20_000;
      while (!got.includes('PONG') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(got, '+OK\r\n+PONG\r\n', problems.join('; '));
      assert.equal((await s.request('DELETE', `/api/v1/api-keys/${key.json.api_key.id}`, { token: user.token })).status, 204);
      // The stream is looked at again every few seconds: the connection ends without a byte more.
      const ended = await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 20_000))]);
      assert.equal(ended, true, 'the carried connection should close after the key was revoked');
      assert.match(problems.join(';'), /API key was revoked/);
    } finally {
      await stop();
    }
  });

  test('a lost link to the API closes the carried connection', async () => {
    const creds = (await s.request('GET', `/api/v1/databases/${id}/credentials`, { token: user.token })).json;
    // A relay on loopback between the CLI and the API: cutting it is the network going away.
    const carried = new Set<net.Socket>();
    const relay = net.createServer((client) => {
      const upstream = net.connect(Number(new URL(s.url).port), '127.0.0.1');
      for (const socket of [client, upstream]) {
        carried.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => carried.delete(socket));
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const controller = new AbortController();
    const problems: string[] = [];
    let listening!: (port: number) => void;
    const up = new Promise<number>((resolve) => (listening = resolve));
    const relayUrl = `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
    const done = runDbConnect({ serverUrl: relayUrl, bearer: user.apiKey, databaseId: id, port: 0, signal: controller.signal, onListening: (p) => listening(p), onProblem: (m) => problems.push(m) });
    try {
      const port = await up;
      const socket = net.connect(port, '127.0.0.1');
      let got = '';
      socket.on('data', (chunk: Buffer) => (got += chunk.toString()));
      socket.on('error', () => undefined);
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.write(`AUTH default ${creds.password}\r\nPING\r\n`);
      await eventually(async () => (got.includes('PONG') ? true : undefined), 20_000, `PONG through the relay (${problems.join('; ')})`);
      for (const link of carried) link.destroy();
      const ended = await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 20_000))]);
      assert.equal(ended, true, 'the carried connection should close once its link is lost');
    } finally {
      controller.abort();
      await done.catch(() => undefined);
      relay.close();
      for (const link of carried) link.destroy();
    }
  });

  test("another user's key is refused as if the database did not exist; a stopped database says how to start it", async () => {
    const problems: string[] = [];
    const outsider = await listen(other.apiKey, problems);
    assert.equal(await talk(outsider.port, 'PING\r\n', /PONG/), '');
    await outsider.stop();
    assert.match(problems.join(';'), /database not found/);

    assert.equal((await s.request('POST', `/api/v1/databases/${id}/stop`, { token: user.token })).json.status, 'stopped');
    const stoppedProblems: string[] = [];
    const stopped = await listen(user.apiKey, stoppedProblems);
    assert.equal(await talk(stopped.port, 'PING\r\n', /PONG/), '');
    await stopped.stop();
    assert.match(stoppedProblems.join(';'), /is stopped: start it first/);
  });

  test("the host's psql through the listener: a 100 MiB COPY each way arrives whole", async () => {
    const created = await s.request('POST', '/api/v1/databases', { token: user.token, body: { name: 'bulk', engine: 'postgres' } });
    assert.equal(created.status, 201, created.text);
    const pgId = created.json.id as string;
    assert.equal((await waitForStatus(s, user.token, pgId)).status, 'running');
    const creds = (await s.request('GET', `/api/v1/databases/${pgId}/credentials`, { token: user.token })).json;
    const controller = new AbortController();
    let port = 0;
    let listening!: () => void;
    const up = new Promise<void>((resolve) => (listening = resolve));
    const problems: string[] = [];
    const done = runDbConnect({ serverUrl: s.url, bearer: user.apiKey, databaseId: pgId, port: 0, signal: controller.signal, onListening: (p) => { port = p; listening(); }, onProblem: (m) => problems.push(m) });
    await up;
    try {
      // 102400 lines of 1023 characters and a newline, each its own (its number, padded): 100 MiB
      // out of the database, every byte in its place (the relay reuses its read buffer).
      const out = await hostPsql(port, creds, "COPY (SELECT lpad(i::text, 1023, 'x') FROM generate_series(1, 102400) AS i) TO STDOUT");
      assert.equal(out.bytes, 100 * 1024 * 1024, problems.join('; '));
      const expected = createHash('sha256');
      for (let i = 1; i <= 102400; i += 1) expected.update(`${String(i).padStart(1023, 'x')}\n`);
      assert.equal(out.sha256, expected.digest('hex'));
      // And 100 MiB in: streamed from here, counted there.
      await hostPsql(port, creds, 'CREATE TABLE bulk (line text)');
      const line = Buffer.from(`${'y'.repeat(1023)}\n`);
      const block = Buffer.concat(Array.from({ length: 64 }, () => line));
      const lines = async function* (): AsyncIterable<Buffer> {
        for (let i = 0; i < 1600; i += 1) yield block;
      };
      await hostPsql(port, creds, 'COPY bulk FROM STDIN', lines);
      const counted = await hostPsql(port, creds, 'SELECT count(*), sum(length(line)) FROM bulk');
      assert.equal(counted.tail.trim(), `${1600 * 64}|${1600 * 64 * 1023}`);
    } finally {
      controller.abort();
      await done;
    }
  });
});
