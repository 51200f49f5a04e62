// Benchmark (a measurement, not a test): the server's memory while big uploads go through a tunnel whose app reads slowly.
//
// `node dist/bench/tunnel-memory.js [--posts 100] [--mib 8] [--rounds 2] [--sequential] [--read-kib 256] [--plane node|haproxy] [--snapshot DIR]`
// starts a fresh `slipway server` (the data plane asked for, Node's by default) and `slipway tunnel`
// in front of a local app that reads each request body slowly (64 KiB every 250 ms per connection
// by default: `--read-kib` per second), then sends `--posts` POSTs of `--mib` MiB each to the
// tunnel's name, all at once (or one after the other with `--sequential`), `--rounds` times. It
// prints the server worker's RSS before (after a full GC), its peak during each round and what it
// settles at after each round (after a full GC, through the worker's inspector: the server runs
// with `--inspect=127.0.0.1:0`). `--snapshot DIR` writes a heap snapshot there after the last round.
// Everything is on loopback.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { BIN } from '../test/helpers/cli.js';
import { childPids, rssOf } from '../test/helpers/process-memory.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, spawnServerProcess } from '../test/helpers/server.js';

const MiB = 1024 * 1024;
const SUBDOMAIN = 'memtest';

function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? (process.argv[at + 1] ?? fallback) : fallback;
}

const POSTS = Number(option('posts', '100'));
const BODY_MIB = Number(option('mib', '8'));
const ROUNDS = Number(option('rounds', '2'));
const SEQUENTIAL = process.argv.includes('--sequential');
const READ_KIB_PER_S = Number(option('read-kib', '256'));
const PLANE = option('plane', 'node');
const SNAPSHOT_DIR = process.argv.includes('--snapshot') ? option('snapshot', '.') : undefined;

/** A local app that reads every request body at READ_KIB_PER_S per connection, then answers with the byte count. */
async function slowApp(): Promise<{ port: number; close(): void }> {
  const slice = 64 * 1024;
  const pauseMs = Math.max(1, Math.round((slice / 1024 / READ_KIB_PER_S) * 1000));
  const server = createServer((req, res) => {
    let bytes = 0;
    let credit = slice;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      credit -= chunk.length;
      if (credit > 0) return;
      credit = slice;
      req.pause();
      setTimeout(() => req.resume(), pauseMs);
    });
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain' }).end(String(bytes)));
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as AddressInfo).port, close: () => server.close() };
}

/** One POST of `bytes` to the tunnel's name, written from one shared buffer with back-pressure; resolves with the status. */
function post(port: number, bytes: number, chunk: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/upload',
      agent: false,
      headers: { host: `${SUBDOMAIN}.localhost:${port}`, 'content-type': 'application/octet-stream', 'content-length': bytes },
    });
    req.on('error', () => resolve(0));
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    let left = bytes;
    const write = (): void => {
      while (left > 0) {
        const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= part.length;
        if (!req.write(part)) return void req.once('drain', write);
      }
      req.end();
    };
    write();
  });
}

/** The worker's inspector (the second "Debugger listening" line: the supervisor's comes first). */
async function inspector(output: () => string): Promise<{ call(method: string, params?: object): Promise<unknown>; close(): void }> {
  let url: string | undefined;
  for (let i = 0; i < 100 && url === undefined; i++) {
    url = [...output().matchAll(/Debugger listening on (ws:\/\/\S+)/g)][1]?.[1];
    if (url === undefined) await sleep(100);
  }
  if (url === undefined) throw new Error('the server worker has no inspector');
  const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 2 ** 31 });
  await once(ws, 'open');
  let id = 0;
  const waiting = new Map<number, (value: unknown) => void>();
  const chunks: string[] = [];
  ws.on('message', (data) => {
    const message = JSON.parse(data.toString()) as { id?: number; method?: string; params?: { chunk?: string }; result?: unknown };
    if (message.method === 'HeapProfiler.addHeapSnapshotChunk') chunks.push(message.params?.chunk ?? '');
    if (message.id !== undefined) waiting.get(message.id)?.(message.method === undefined && chunks.length > 0 ? chunks.splice(0).join('') : message.result);
  });
  return {
    call: (method, params = {}) =>
      new Promise((resolve) => {
        id += 1;
        waiting.set(id, resolve);
        ws.send(JSON.stringify({ id, method, params }));
      }),
    close: () => ws.close(),
  };
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-tmem-'));
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-tmem-home-'));
  const server = await spawnServerProcess(
    {
      SLIPWAY_PORT: '0',
      SLIPWAY_HOST: '127.0.0.1',
      SLIPWAY_DOMAIN: 'localhost',
      SLIPWAY_DATA_DIR: dataDir,
      SLIPWAY_ADMIN_EMAIL: ADMIN_EMAIL,
      SLIPWAY_ADMIN_PASSWORD: ADMIN_PASSWORD,
      SLIPWAY_DATA_PLANE: PLANE,
    },
    ['--inspect=127.0.0.1:0'],
  );
  const app = await slowApp();
  let tunnel: ChildProcess | undefined;
  try {
    const worker = childPids(server.child.pid as number)[0];
    if (worker === undefined) throw new Error('no server worker');
    const devtools = await inspector(() => server.output());
    const settled = async (): Promise<number> => {
      await devtools.call('HeapProfiler.collectGarbage');
      await sleep(1000);
      await devtools.call('HeapProfiler.collectGarbage');
      return rssOf(worker) ?? 0;
    };
    /** The worker's own account of its memory (V8 heap, Buffers), in MiB. */
    const memoryUsage = async (): Promise<Record<string, number>> => {
      const answer = (await devtools.call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true })) as { result: { value: string } };
      return JSON.parse(answer.result.value) as Record<string, number>;
    };
    const usage = async (given?: Record<string, number>): Promise<string> => {
      const m = given ?? (await memoryUsage());
      return ['heapTotal', 'heapUsed', 'external', 'arrayBuffers'].map((k) => `${k} ${((m[k] ?? 0) / MiB).toFixed(1)}`).join(', ');
    };
    const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const key = (await request(server.url, 'POST', '/api/v1/api-keys', { token, body: { name: 'bench' } })).json.key as string;
    tunnel = spawn(process.execPath, [BIN, 'tunnel', String(app.port), '--subdomain', SUBDOMAIN, '--json'], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, SLIPWAY_URL: server.url, SLIPWAY_API_KEY: key },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    for await (const line of createInterface({ input: tunnel.stdout as NodeJS.ReadableStream })) {
      if ((JSON.parse(line) as { type: string }).type === 'connected') break;
    }
    tunnel.stdout?.resume();
    // One small request warms the path (the first stream, the framer), as a visitor would before an upload.
    await post(server.port, 1024, Buffer.alloc(1024));
    const before = await settled();
    console.log(
      `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}; ${PLANE} plane; ${POSTS} × ${BODY_MIB} MiB POSTs ${SEQUENTIAL ? 'one after the other' : 'at once'}, ` +
        `app reading ${READ_KIB_PER_S} KiB/s per connection; server worker RSS before ${(before / MiB).toFixed(1)} MiB (after a full GC; ${await usage()})`,
    );
    const chunk = Buffer.alloc(64 * 1024, 'u');
    for (let round = 1; round <= ROUNDS; round++) {
      let peak = rssOf(worker) ?? 0;
      const sampler = setInterval(() => (peak = Math.max(peak, rssOf(worker) ?? 0)), 25);
      // The worker's heap and Buffers at their largest, asked every half second.
      const most: Record<string, number> = {};
      const asker = setInterval(() => {
        void memoryUsage().then((m) => {
          for (const [k, v] of Object.entries(m)) most[k] = Math.max(most[k] ?? 0, v);
        });
      }, 500);
      const started = Date.now();
      const statuses: number[] = [];
      if (SEQUENTIAL) {
        for (let i = 0; i < POSTS; i++) statuses.push(await post(server.port, BODY_MIB * MiB, chunk));
      } else {
        statuses.push(...(await Promise.all(Array.from({ length: POSTS }, () => post(server.port, BODY_MIB * MiB, chunk)))));
      }
      clearInterval(sampler);
      clearInterval(asker);
      const seconds = (Date.now() - started) / 1000;
      const after = await settled();
      const failed = statuses.filter((s) => s !== 200).length;
      console.log(
        `round ${round}: ${seconds.toFixed(1)} s, ${failed} of ${POSTS} not 200; peak RSS ${(peak / MiB).toFixed(1)} MiB (+${((peak - before) / MiB).toFixed(1)}; largest ${await usage(most)}), ` +
          `settled after a full GC ${(after / MiB).toFixed(1)} MiB (+${((after - before) / MiB).toFixed(1)}; ${await usage()})`,
      );
    }
    if (SNAPSHOT_DIR !== undefined) {
      const snapshot = (await devtools.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false })) as string;
      const file = path.join(SNAPSHOT_DIR, `tunnel-memory-${Date.now()}.heapsnapshot`);
      fs.writeFileSync(file, snapshot);
      console.log(`heap snapshot: ${file}`);
    }
    devtools.close();
  } finally {
    tunnel?.kill();
    app.close();
    await server.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(home, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
