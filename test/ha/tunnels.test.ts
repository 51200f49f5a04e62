// Tunnels across instances (decisions §15): a tunnel held by one instance is reached through every other edge; forged calls reach nothing.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { INSTANCE_CALL_KEY_INFO, InstanceCalls } from '../../src/tunnel/instance-calls.js';
import { runTunnelClient, TunnelRefusedError } from '../../src/tunnel/tunnel-client.js';
import { eventually } from '../helpers/apps.js';
import { startCluster, type Cluster, type Instance } from '../helpers/instances.js';
import { dropClusterDatabase, testDatabase } from '../helpers/server.js';

const MiB = 1024 * 1024;
/** The visitor's own address: not the one instances use to reach each other (127.0.0.1). */
const VISITOR_ADDRESS = '127.0.0.2';

interface Seen {
  method: string;
  url: string;
  forwardedFor: string | undefined;
  forwardHeaders: string[];
}

/** The app behind the tunnel: GET /bytes?n= streams n bytes; POST /echo streams its body back as it arrives. */
async function startLocalApp(): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      forwardedFor: req.headers['x-forwarded-for'] as string | undefined,
      forwardHeaders: Object.keys(req.headers).filter((name) => name.startsWith('slipway-forward-')),
    });
    const url = new URL(req.url ?? '/', 'http://app.invalid');
    if (req.method === 'POST' && url.pathname === '/echo') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
      return;
    }
    if (url.pathname === '/bytes') {
      const total = Number(url.searchParams.get('n'));
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': total });
      let sent = 0;
      const more = (): void => {
        while (sent < total) {
          const chunk = pattern(sent, Math.min(64 * 1024, total - sent));
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`hello from the tunnel; you are ${String(req.headers['x-forwarded-for'])}\n`);
  });
  // An upgrade: 101, then every byte echoed.
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', forwardedFor: req.headers['x-forwarded-for'] as string | undefined, forwardHeaders: [] });
    // (HAProxy checks the accept value of a WebSocket answer.)
    const accept = crypto.createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Deterministic bytes, so either end can check what it got. */
function pattern(offset: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) out[i] = (offset + i) % 251;
  return out;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A request to an instance's edge from the visitor's address, with the tunnel's Host. */
function visit(instance: Instance, host: string, options: { method?: string; path?: string; headers?: Record<string, string>; body?: Buffer } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', localAddress: VISITOR_ADDRESS, port: instance.port, method: options.method ?? 'GET', path: options.path ?? '/', headers: { host, ...options.headers }, agent: false, timeout: 60_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * POSTs `total` bytes to /echo in 1 MiB pieces, sending each piece only once the previous one has
 * come back: the body must stream both ways through both instances (neither buffers it whole).
 */
function echoInLockstep(instance: Instance, host: string, total: number): Promise<{ status: number; received: Buffer }> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let received = 0;
    const chunks: Buffer[] = [];
    const req = http.request({ host: '127.0.0.1', localAddress: VISITOR_ADDRESS, port: instance.port, method: 'POST', path: '/echo', headers: { host, 'content-type': 'application/octet-stream' }, agent: false, timeout: 60_000 });
    const sendNext = (): void => {
      if (sent >= total) return void req.end();
      const piece = pattern(sent, Math.min(MiB, total - sent));
      sent += piece.length;
      req.write(piece);
    };
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        received += chunk.length;
        if (received === sent) sendNext();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, received: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout: the echo did not stream back')));
    req.on('error', reject);
    req.flushHeaders();
    sendNext();
  });
}

/** An upgrade through an instance's edge: the answer head, then `message` echoed back over the joined connection. */
function upgradeAndEcho(instance: Instance, host: string, message: string): Promise<{ head: string; echoed: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: instance.port, localAddress: VISITOR_ADDRESS });
    const timer = setTimeout(() => socket.destroy(new Error('timeout: no echo through the upgrade')), 30_000);
    let text = '';
    socket.setEncoding('latin1');
    socket.on('connect', () => {
      socket.write(`GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${crypto.randomBytes(16).toString('base64')}\r\n\r\n`);
    });
    let sent = false;
    socket.on('data', (chunk: string) => {
      text += chunk;
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = text.slice(0, end);
      if (!head.startsWith('HTTP/1.1 101')) {
        clearTimeout(timer);
        socket.destroy();
        return resolve({ head, echoed: '' });
      }
      if (!sent) {
        sent = true;
        socket.write(message);
      }
      const echoed = text.slice(end + 4);
      if (echoed.length >= message.length) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ head, echoed });
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

function startClient(serverUrl: string, apiKey: string, port: number, subdomain: string): { connected: Promise<string>; connections(): number; result: Promise<unknown>; stop(): Promise<void> } {
  const controller = new AbortController();
  let connected!: (url: string) => void;
  let connections = 0;
  const ready = new Promise<string>((resolve) => (connected = resolve));
  const done = runTunnelClient({
    serverUrl,
    apiKey,
    port,
    subdomain,
    maxBackoffMs: 300,
    signal: controller.signal,
    onEvent: (event) => {
      if (event.type !== 'connected') return;
      connections++;
      connected(event.url);
    },
  }).then(
    () => undefined,
    (err: unknown) => err,
  );
  return {
    connected: ready,
    connections: () => connections,
    /** Settles when the client ends: undefined when stopped, else why the server refused it for good. */
    result: done,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

/**
 * A load balancer in front of the instances, for the tunnel client: each connection goes to the
 * first instance that accepts it; while `down`, connections are refused (closed at once).
 */
async function startBalancer(ports: readonly number[]): Promise<{ url: string; down: boolean; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const state = { down: false };
  const server = net.createServer((visitor) => {
    sockets.add(visitor);
    visitor.once('close', () => sockets.delete(visitor));
    visitor.on('error', () => visitor.destroy());
    if (state.down) return void visitor.destroy();
    visitor.pause();
    const attempt = (i: number): void => {
      const port = ports[i];
      if (port === undefined) return void visitor.destroy();
      const upstream = net.connect({ host: '127.0.0.1', port });
      // Refused (the instance is down): the next one. Once connected, errors end both sides (below).
      upstream.once('error', () => attempt(i + 1));
      upstream.once('connect', () => {
        sockets.add(upstream);
        upstream.removeAllListeners('error');
        upstream.on('error', () => visitor.destroy());
        upstream.once('close', () => {
          sockets.delete(upstream);
          visitor.destroy();
        });
        visitor.once('close', () => upstream.destroy());
        visitor.pipe(upstream);
        upstream.pipe(visitor);
        visitor.resume();
      });
    };
    attempt(0);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get down() {
      return state.down;
    },
    set down(value: boolean) {
      state.down = value;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('tunnels across instances on one PostgreSQL', async () => {
  const database = await testDatabase();
  // The SQLite pass has no PostgreSQL: scripts/test.mjs runs test/ha in its PostgreSQL pass only.
  if (database === undefined) return;
  let cluster: Cluster;
  let local: Awaited<ReturnType<typeof startLocalApp>>;
  let apiKey: string;
  let client: ReturnType<typeof startClient> | undefined;
  let balancer: Awaited<ReturnType<typeof startBalancer>>;
  const subdomain = `xtun-${process.pid}`;
  const host = `${subdomain}.localhost`;
  /** Instance ids by URL, from the registry. */
  const ids = new Map<string, string>();

  before(async () => {
    local = await startLocalApp();
    // Both data planes (decisions §8): instance 1 behind HAProxy, the others on Node's. (The instance killed below is
    // on Node's: a killed server's HAProxy would outlive it.)
    cluster = await startCluster(database.url, 3, {}, [undefined, { SLIPWAY_DATA_PLANE: 'haproxy' }]);
    const [a] = cluster.instances as [Instance];
    const key = await a.request('POST', '/api/v1/api-keys', { token: cluster.adminToken, body: { name: 'xtun' } });
    assert.equal(key.status, 201, key.text);
    apiKey = key.json.key as string;
    const listed = await a.request('GET', '/api/v1/instances', { token: cluster.adminToken });
    for (const instance of listed.json as Array<{ id: string; url: string }>) ids.set(instance.url, instance.id);
  });
  after(async () => {
    await client?.stop();
    await balancer?.close();
    await cluster?.close();
    await local?.close();
    await dropClusterDatabase(database);
  });

  test('a tunnel held by one instance is reached through the others\' edges: a GET and a POST of a few MiB, streamed', async () => {
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    // The client reaches the instances through a load balancer: instance 0 while it lives, else instance 1.
    balancer = await startBalancer([a.port, b.port]);
    client = startClient(balancer.url, apiKey, local.port, subdomain);
    await client.connected;
    for (const instance of [a, b, c]) {
      await eventually(async () => ((await visit(instance, host)).status === 200 ? true : undefined), 30_000, `the tunnel through ${instance.name}`);
    }
    // The visitor's own address reaches the app, not the forwarding instance's; no call header does.
    // Listed by every instance, not only the one holding it.
    for (const instance of [b, c]) {
      const listed = await instance.request('GET', '/api/v1/tunnels', { token: cluster.adminToken });
      assert.equal(listed.status, 200, listed.text);
      const mine = (listed.json as Array<{ subdomain: string; state: string }>).filter((t) => t.subdomain === subdomain);
      assert.deepEqual(mine.map((t) => t.state), ['connected'], `${instance.name}: ${listed.text}`);
    }
    const hello = await visit(b, host);
    assert.equal(hello.body.toString(), `hello from the tunnel; you are ${VISITOR_ADDRESS}\n`);
    assert.ok(local.seen.every((s) => s.forwardHeaders.length === 0), JSON.stringify(local.seen));

    const size = 4 * MiB;
    for (const via of [b, c]) {
      const got = await visit(via, host, { path: `/bytes?n=${size}` });
      assert.equal(got.status, 200);
      assert.equal(got.body.length, size);
      assert.ok(got.body.equals(pattern(0, size)), `the GET body arrives intact through ${via.name}`);
    }

    for (const via of [b, c]) {
      const echoed = await echoInLockstep(via, host, size);
      assert.equal(echoed.status, 200);
      assert.equal(echoed.received.length, size);
      assert.ok(echoed.received.equals(pattern(0, size)), `the POST body streams there and back intact through ${via.name}`);
      const upgraded = await upgradeAndEcho(via, host, `echo through ${via.name}`);
      assert.match(upgraded.head, /^HTTP\/1\.1 101/, upgraded.head);
      assert.equal(upgraded.echoed, `echo through ${via.name}`);
    }
    const upgrades = local.seen.filter((s) => s.url === '/ws');
    assert.equal(upgrades.length, 2);
    assert.ok(upgrades.every((s) => s.forwardedFor === VISITOR_ADDRESS), JSON.stringify(upgrades));
  });

  test('forged, replayed, expired or misdirected inter-instance calls are answered 401 and reach nothing', async () => {
    const [a, b] = cluster.instances as [Instance, Instance, Instance];
    const holder = ids.get(a.url);
    assert.ok(holder !== undefined);
    const key = new ValueCipher(Buffer.from(cluster.secretKey, 'base64')).deriveKey(INSTANCE_CALL_KEY_INFO);
    const facts = { method: 'GET', host, path: '/', forwardedFor: '203.0.113.9', proto: 'http', target: holder };
    const asHeaders = (raw: string[]): Record<string, string> => {
      const out: Record<string, string> = {};
      for (let i = 0; i + 1 < raw.length; i += 2) out[raw[i] as string] = raw[i + 1] as string;
      return out;
    };
    // A good call first: it reaches the tunnel once, with the visitor it names.
    const good = asHeaders(new InstanceCalls(key, 'test').sign(facts));
    const before = local.seen.length;
    const served = await visit(a, host, { headers: good });
    assert.equal(served.status, 200, served.body.toString());
    assert.equal(served.body.toString(), 'hello from the tunnel; you are 203.0.113.9\n');
    assert.equal(local.seen.length, before + 1);

    const refused: Array<[string, Record<string, string>, Instance]> = [
      ['replayed', good, a],
      ['forged (another key)', asHeaders(new InstanceCalls(crypto.randomBytes(32), 'test').sign(facts)), a],
      ['signed with the installation key itself', asHeaders(new InstanceCalls(Buffer.from(cluster.secretKey, 'base64'), 'test').sign(facts)), a],
      ['expired', asHeaders(new InstanceCalls(key, 'test', { now: () => Date.now() - 120_000 }).sign(facts)), a],
      ['for another instance', asHeaders(new InstanceCalls(key, 'test').sign(facts)), b],
      ['for another path', asHeaders(new InstanceCalls(key, 'test').sign({ ...facts, path: '/admin' })), a],
    ];
    for (const [what, headers, via] of refused) {
      const res = await visit(via, host, { headers });
      assert.equal(res.status, 401, `${what}: ${res.body.toString()}`);
      const body = JSON.parse(res.body.toString()) as { error: string; message: string };
      assert.equal(body.error, 'unauthorized', what);
      assert.equal(typeof body.message, 'string');
    }
    // A forged upgrade too.
    const upgrade = await visit(a, host, { headers: { ...asHeaders(new InstanceCalls(crypto.randomBytes(32), 'test').sign(facts)), connection: 'Upgrade', upgrade: 'websocket' } });
    assert.equal(upgrade.status, 401);
    assert.equal(local.seen.length, before + 1, 'nothing refused reached the tunnel');
  });

  test('its holder killed, the host answers as an offline tunnel; the client reconnecting to another instance takes the name back', async () => {
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    assert.ok(client !== undefined);
    assert.equal(client.connections(), 1);
    // The balancer holds the client back until the offline answer has been seen.
    balancer.down = true;
    await cluster.kill(a);
    await eventually(async () => {
      const res = await visit(c, host);
      return res.status === 503 && /no tunnel client is connected/.test(res.body.toString()) ? true : undefined;
    }, 30_000, 'the offline page through instance 2');
    // The same client reconnects (through the balancer, now to instance 1) and keeps its name.
    balancer.down = false;
    const reconnected = client;
    await eventually(async () => (reconnected.connections() >= 2 ? true : undefined), 30_000, 'the client to reconnect');
    const listed = await b.request('GET', '/api/v1/tunnels', { token: cluster.adminToken });
    assert.deepEqual((listed.json as Array<{ subdomain: string }>).filter((t) => t.subdomain === subdomain).length, 1, listed.text);
    for (const instance of [b, c]) {
      await eventually(async () => ((await visit(instance, host)).status === 200 ? true : undefined), 30_000, `the tunnel again through ${instance.name}`);
    }
    const got = await visit(c, host, { path: `/bytes?n=${MiB}` });
    assert.ok(got.body.equals(pattern(0, MiB)));
  });

  test('an API key deleted on one instance closes its tunnel held by another', async () => {
    const [, b, c] = cluster.instances as [Instance, Instance, Instance];
    const keys = await c.request('GET', '/api/v1/api-keys', { token: cluster.adminToken });
    const listedKeys = (keys.json.items ?? keys.json) as Array<{ id: string; name: string }>;
    const id = listedKeys.find((k) => k.name === 'xtun')?.id;
    assert.ok(id !== undefined, keys.text);
    assert.equal((await c.request('DELETE', `/api/v1/api-keys/${id}`, { token: cluster.adminToken })).status, 204);
    for (const instance of [b, c]) {
      await eventually(async () => ((await visit(instance, host)).status === 404 ? true : undefined), 30_000, `the tunnel gone on ${instance.name}`);
    }
  });

  test('a user disabled on one instance has their tunnel held by another closed at once (the client stops with the reason)', async () => {
    const [, b, c] = cluster.instances as [Instance, Instance, Instance];
    const email = `xtun-off-${process.pid}@test.local`;
    const created = await c.request('POST', '/api/v1/users', { token: cluster.adminToken, body: { email, password: 'password-xtun-off' } });
    assert.equal(created.status, 201, created.text);
    const login = await c.request('POST', '/api/v1/auth/login', { body: { email, password: 'password-xtun-off' } });
    const key = await c.request('POST', '/api/v1/api-keys', { token: login.json.token as string, body: { name: 'off' } });
    assert.equal(key.status, 201, key.text);
    const name = `xtun-off-${process.pid}`;
    const held = startClient(b.url, key.json.key as string, local.port, name);
    try {
      await held.connected;
      await eventually(async () => ((await visit(c, `${name}.localhost`)).status === 200 ? true : undefined), 30_000, 'the tunnel through instance 2');
      const res = await c.request('PATCH', `/api/v1/users/${created.json.id as string}`, { token: cluster.adminToken, body: { disabled: true } });
      assert.equal(res.status, 200, res.text);
      const ended = await Promise.race([held.result, sleep(30_000).then(() => 'still running after 30 s')]);
      assert.ok(ended instanceof TunnelRefusedError && ended.code === 'unauthorized' && /account has been disabled/.test(ended.message), String(ended));
      for (const instance of [b, c]) {
        await eventually(async () => ((await visit(instance, `${name}.localhost`)).status === 404 ? true : undefined), 30_000, `the tunnel gone on ${instance.name}`);
      }
    } finally {
      await held.stop();
    }
  });
});
