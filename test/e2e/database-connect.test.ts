// End-to-end: `slipway db connect`'s listener carries a client's connection through the API's WebSocket to a database that publishes no port; refusals say why.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { runDbConnect } from '../../src/cli/db-connect.js';
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
});
