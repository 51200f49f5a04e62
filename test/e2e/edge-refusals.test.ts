// The edge's refusals written as the attack, on both data planes: malformed, ambiguous and late heads over a raw socket get Slipway's answer (JSON for the API host, its page on app hosts), never HAProxy's built-in HTML, and never reach the app; and the audit's two-factor oracle (issue 33 item 7) through each plane.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { runTunnelClient } from '../../src/tunnel/tunnel-client.js';
import { badRequestPage, renderPage, requestTimeoutPage } from '../../src/proxy/pages.js';
import { base32Decode, hotp, stepAt } from '../../src/domain/totp.js';
import { PLANES } from '../helpers/planes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface Answer {
  /** The status line, e.g. "HTTP/1.1 400 Bad Request"; '' when the server closed without a word. */
  readonly statusLine: string;
  /** Header names in lower case (the last value of each). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** Writes `bytes` on a fresh connection and reads until the server closes it. */
function exchange(port: number, bytes: Buffer | string, timeoutMs = 20_000): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${timeoutMs} ms; read ${JSON.stringify(Buffer.concat(chunks).toString('latin1'))}`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.once('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const lines = (split === -1 ? text : text.slice(0, split)).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ statusLine: lines[0] ?? '', headers, body: split === -1 ? '' : text.slice(split + 4) });
    });
    socket.write(bytes);
  });
}

/** The API host's answer: `{error, message}` JSON, exactly. */
function assertJson(answer: Answer, status: string, message: string, what: string): void {
  assert.equal(answer.statusLine, `HTTP/1.1 ${status}`, `${what}: ${answer.statusLine} ${answer.body}`);
  assert.equal(answer.headers['content-type'], 'application/json; charset=utf-8', what);
  assert.equal(answer.headers['cache-control'], 'no-store', what);
  assert.equal(answer.headers['connection'], 'close', what);
  assert.equal(answer.body, JSON.stringify({ error: 'validation_error', message }), what);
}

/** An app host's answer: Slipway's page, exactly. */
function assertPage(answer: Answer, status: string, page: string, what: string): void {
  assert.equal(answer.statusLine, `HTTP/1.1 ${status}`, `${what}: ${answer.statusLine} ${answer.body}`);
  assert.equal(answer.headers['content-type'], 'text/html; charset=utf-8', what);
  assert.equal(answer.headers['cache-control'], 'no-store', what);
  assert.equal(answer.headers['connection'], 'close', what);
  assert.equal(answer.body, page, what);
}

/**
 * The attacks of the audit (issue 33, item 6): heads no edge may pass on, each with the refusal it
 * gets. (Two equal Content-Lengths are one length to a tunnel's framer, as RFC 9112 §6.3 allows; the
 * HTTP server refuses them, so they are sent to the API host only.)
 */
const MALFORMED = (host: string, api = false): Array<{ name: string; bytes: string; message: string }> => [
  { name: 'two identical Host headers', bytes: `GET / HTTP/1.1\r\nHost: ${host}\r\nHost: ${host}\r\n\r\n`, message: 'the request has more than one Host header' },
  { name: 'two Host headers lines apart', bytes: `GET / HTTP/1.1\r\nHost: ${host}\r\nAccept: */*\r\nhost: ${host}\r\n\r\n`, message: 'the request has more than one Host header' },
  { name: 'a bad header line', bytes: `GET / HTTP/1.1\r\nHost: ${host}\r\nBad Header: x\r\n\r\n`, message: 'malformed HTTP request' },
  { name: 'two Content-Lengths', bytes: `POST / HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab`, message: 'malformed HTTP request' },
  ...(api ? [{ name: 'two equal Content-Lengths', bytes: `POST / HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nab`, message: 'malformed HTTP request' }] : []),
  { name: 'Content-Length: abc', bytes: `POST / HTTP/1.1\r\nHost: ${host}\r\nContent-Length: abc\r\n\r\n`, message: 'malformed HTTP request' },
];

/** Bytes that are no HTTP at all (the start of a TLS hello, then noise): no Host can be read from them. */
const GARBAGE = Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03, 0xff, 0x00, 0x7f, 0x0d, 0x0a, 0x0d, 0x0a]);

for (const plane of PLANES) {
  describe(`edge refusals, as the attack (${plane} data plane)`, () => {
    let ts: TestServer;
    let app: Server;
    let appRequests = 0;
    let tunnel: AbortController;
    let tunnelDone: Promise<void>;
    let appHost: string;

    before(async () => {
      // A short head timeout, so that the late head is answered within the test.
      ts = await startTestServer({ SLIPWAY_DATA_PLANE: plane, SLIPWAY_HEADERS_TIMEOUT_SECONDS: '2' });
      app = createServer((req, res) => {
        appRequests += 1;
        req.resume();
        req.on('end', () => res.end('app'));
      });
      app.listen(0, '127.0.0.1');
      await once(app, 'listening');
      // A live app at a subdomain: a tunnel to the local server above.
      const user = await ts.newUser('refusals');
      tunnel = new AbortController();
      let connected: (subdomain: string) => void = () => {};
      const ready = new Promise<string>((resolve) => (connected = resolve));
      tunnelDone = runTunnelClient({
        serverUrl: ts.url,
        apiKey: user.apiKey,
        port: (app.address() as AddressInfo).port,
        signal: tunnel.signal,
        onEvent: (event) => {
          if (event.type === 'connected') connected(event.subdomain);
        },
      }).catch(() => {});
      const subdomain = await Promise.race([ready, sleep(20_000).then(() => Promise.reject(new Error('the tunnel did not connect')))]);
      appHost = `${subdomain}.localhost:${ts.port}`;
    });
    after(async () => {
      tunnel.abort();
      await tunnelDone;
      app.closeAllConnections();
      app.close();
      await ts.close();
    });

    test('well-formed requests pass: the app answers on its host, the API on its own', async () => {
      const before = appRequests;
      const toApp = await exchange(ts.port, `GET / HTTP/1.1\r\nHost: ${appHost}\r\nConnection: close\r\n\r\n`);
      assert.equal(toApp.statusLine, 'HTTP/1.1 200 OK', toApp.body);
      assert.equal(toApp.body, 'app');
      assert.equal(appRequests, before + 1);
      const toApi = await exchange(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1:${ts.port}\r\nConnection: close\r\n\r\n`);
      assert.equal(toApi.statusLine, 'HTTP/1.1 401 Unauthorized', toApi.body);
    });

    test('malformed and ambiguous heads to the API host: 400 with {error, message} JSON', async () => {
      for (const attack of MALFORMED(`127.0.0.1:${ts.port}`, true)) assertJson(await exchange(ts.port, attack.bytes), '400 Bad Request', attack.message, attack.name);
      for (const attack of MALFORMED('localhost', true)) assertJson(await exchange(ts.port, attack.bytes), '400 Bad Request', attack.message, `${attack.name} (localhost)`);
    });

    test('malformed and ambiguous heads to an app host: 400 with Slipway’s page, and the app never sees them', async () => {
      const before = appRequests;
      for (const host of [appHost, `nothing-here.localhost:${ts.port}`]) {
        for (const attack of MALFORMED(host)) {
          const answer = await exchange(ts.port, attack.bytes);
          assertPage(answer, '400 Bad Request', renderPage(badRequestPage(attack.message)), `${attack.name} (${host})`);
          assert.doesNotMatch(answer.body, /Your browser sent an invalid request/);
        }
      }
      assert.equal(appRequests, before, 'a refused request reached the app');
    });

    test('binary garbage names no host: 400 with {error, message} JSON (the API’s answer, as routing would send it there)', async () => {
      assertJson(await exchange(ts.port, GARBAGE), '400 Bad Request', 'malformed HTTP request', 'garbage');
    });

    test('the two-factor oracle through this plane: a stolen password without the code gets the same answer as a wrong one, headers and all', async () => {
      const victim = await ts.newUser('oracle');
      const setup = await ts.request('POST', '/api/v1/users/me/2fa', { token: victim.token });
      assert.equal(setup.status, 201, setup.text);
      const confirmed = await ts.request('POST', '/api/v1/users/me/2fa/confirm', { token: victim.token, body: { code: hotp(base32Decode(setup.json.secret), stepAt(Date.now())) } });
      assert.equal(confirmed.status, 200, confirmed.text);
      const seen = async (password: string): Promise<string> => {
        const res = await ts.request('POST', '/api/v1/auth/login', { body: { email: victim.email, password } });
        const headers = [...res.headers.entries()].filter(([name]) => name !== 'date');
        return JSON.stringify({ status: res.status, headers, body: res.text });
      };
      const stolen = await seen(victim.password);
      assert.equal(stolen, await seen('not-the-password'));
      assert.equal(JSON.parse(stolen).body, JSON.stringify({ error: 'invalid_credentials', message: 'wrong email, password or two-factor code' }));
    });

    test('a head held open past SLIPWAY_HEADERS_TIMEOUT_SECONDS: 408, JSON on the API host, the page on an app host', async () => {
      const before = appRequests;
      assertJson(await exchange(ts.port, `GET /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1:${ts.port}\r\nAccept: */*\r\n`), '408 Request Timeout', 'the request did not arrive in time', 'API host');
      assertPage(await exchange(ts.port, `GET / HTTP/1.1\r\nHost: ${appHost}\r\nAccept: */*\r\n`), '408 Request Timeout', renderPage(requestTimeoutPage()), 'app host');
      // Nothing readable yet: the API's answer.
      assertJson(await exchange(ts.port, 'GET / HT'), '408 Request Timeout', 'the request did not arrive in time', 'a head cut in its first line');
      assert.equal(appRequests, before, 'a late head reached the app');
    });
  });
}
