// Benchmark (a measurement, not a test): the tunnel server's memory while a tunnel client never reads.
//
// `node dist/bench/tunnel-never-reading.js [--flood-mib 64]` runs a tunnel server (TunnelServer and
// the front server, as main.ts wires them) in a child process, then, from this process, a raw
// WebSocket tunnel client that registers, answers the first ping, pauses reading and floods OPEN
// frames (each answered by a RESET it never reads) while 100 visitors wait on its name. It prints the
// server process's RSS before and at its peak, how many MiB of OPENs were sent, and whether the
// server disconnected the client. Everything is on loopback.
import { nodeDataPlane } from '../src/proxy/node-data-plane.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { AppProxy } from '../src/proxy/app-proxy.js';
import { RoutingTable } from '../src/proxy/routing-table.js';
import { CONNECT_PATH } from '../src/tunnel/protocol.js';
import { TunnelServer, type TunnelOwner } from '../src/tunnel/tunnel-server.js';

const SELF = fileURLToPath(import.meta.url);
const MiB = 1024 * 1024;
const KEY = 'slw_k1_benchbenchbenchbenchbenchbenchbench';

/** The server role: prints its port, answers each IPC message with its RSS and whether `sink` is routed. */
async function roleServer(): Promise<void> {
  const table = new RoutingTable('localhost');
  const owner: TunnelOwner = { userId: 'bench', apiKeyId: 'bench-key' };
  let port = 0;
  const tunnels = new TunnelServer({
    dataPlane: nodeDataPlane(table, { drain: async () => undefined }),
    authority: { authenticateKey: async (key) => (key === KEY ? owner : null), claimSubdomain: async () => 'ok', releaseSubdomain: async () => {} },
    publicUrlFor: (subdomain) => `http://${subdomain}.localhost:${port}`,
    limits: { tunnelsPerKey: 10, streamsPerTunnel: 256 },
    heartbeatMs: 60_000,
  });
  const proxy = new AppProxy({ table, publicProtocol: 'http' });
  const front = createServer((req, res) => {
    if (!proxy.handleRequest(req, res)) res.writeHead(404).end();
  });
  front.on('upgrade', (req, socket, head) => {
    if (new URL(req.url ?? '/', 'http://x').pathname === CONNECT_PATH) tunnels.handleUpgrade(req, socket, head);
    else if (!proxy.handleUpgrade(req, socket, head)) socket.destroy();
  });
  front.listen(0, '127.0.0.1');
  await once(front, 'listening');
  port = (front.address() as AddressInfo).port;
  process.on('message', () => process.send?.({ rss: process.memoryUsage.rss(), routed: table.get('sink') !== undefined }));
  process.stdout.write(`${JSON.stringify({ port })}\n`);
}

async function ask(child: ChildProcess): Promise<{ rss: number; routed: boolean }> {
  const answer = once(child, 'message') as Promise<[{ rss: number; routed: boolean }]>;
  child.send({});
  return (await answer)[0];
}

function openFlood(count: number, firstId: number): Buffer {
  const message = Buffer.alloc(1 + count * 9);
  message[0] = 0x7f;
  for (let i = 0; i < count; i++) {
    const at = 1 + i * 9;
    message.writeUInt32BE(5, at);
    message[at + 4] = 1;
    message.writeUInt32BE(((firstId + i) % 0xfffffffe) + 1, at + 5);
  }
  return message;
}

async function main(): Promise<void> {
  const floodIndex = process.argv.indexOf('--flood-mib');
  const floodMiB = floodIndex > 0 ? Number(process.argv[floodIndex + 1]) : 64;
  const child = spawn(process.execPath, ['--max-semi-space-size=2', SELF, 'server'], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  try {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    let port = 0;
    for await (const line of lines) {
      port = (JSON.parse(line) as { port: number }).port;
      break;
    }
    const ws = new WebSocket(`ws://127.0.0.1:${port}${CONNECT_PATH}?subdomain=sink`, { headers: { authorization: `Bearer ${KEY}` }, perMessageDeflate: false });
    ws.on('error', () => {});
    await once(ws, 'message');
    await sleep(200);
    const before = await ask(child);
    (ws as unknown as { _socket: Socket })._socket.pause();
    const visitors = Array.from({ length: 100 }, () => {
      const req = request({ host: '127.0.0.1', port, path: '/', headers: { host: `sink.localhost:${port}` }, agent: false });
      req.on('error', () => {});
      req.on('response', (res) => res.resume());
      req.end();
      return req;
    });
    let peak = before.rss;
    let sent = 0;
    let routed = true;
    const deadline = Date.now() + 60_000;
    while (sent < floodMiB * MiB && Date.now() < deadline) {
      if (ws.readyState !== WebSocket.OPEN) break;
      ws.send(openFlood(100_000, sent));
      sent += 900_000;
      await sleep(20);
      const now = await ask(child);
      peak = Math.max(peak, now.rss);
      routed = now.routed;
      if (!routed) break;
    }
    for (let i = 0; i < 25; i++) {
      await sleep(40);
      const now = await ask(child);
      peak = Math.max(peak, now.rss);
      routed = now.routed;
    }
    const after = await ask(child);
    process.stdout.write(
      `never-reading tunnel client: ${(sent / MiB).toFixed(1)} MiB of OPENs sent; server RSS ${(before.rss / MiB).toFixed(1)} MiB before, ` +
        `peak ${(peak / MiB).toFixed(1)} MiB (+${((peak - before.rss) / MiB).toFixed(1)}), ${(after.rss / MiB).toFixed(1)} MiB at the end; ` +
        `client ${routed ? 'STILL CONNECTED' : 'disconnected, name released'}\n`,
    );
    for (const req of visitors) req.destroy();
    ws.terminate();
  } finally {
    child.kill();
  }
}

if (process.argv[2] === 'server') {
  void roleServer();
} else {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
