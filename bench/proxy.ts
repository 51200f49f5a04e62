// Benchmark: requests/s and latency of an upstream served directly vs through the embedded app proxy.
//
// Usage: node dist/bench/proxy.js [--upstream host:port] [--duration 5] [--warmup 1] [--connections 32]
//                                 [--small-path /small] [--large-path /1m]
// Without --upstream a built-in upstream is started in a child process (GET /small → 11 bytes,
// GET /1m → 1 MiB). The proxy runs in another child process; this process only generates load with
// its own keep-alive load generator (no wrk/autocannon needed). Everything stays on loopback.
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { AppProxy } from '../src/proxy/app-proxy.js';
import { RoutingTable, type Upstream } from '../src/proxy/routing-table.js';

const DOMAIN = 'bench.test';
const APP_HOST = `app.${DOMAIN}`;

interface Options {
  upstream: Upstream | undefined;
  durationMs: number;
  warmupMs: number;
  connections: number;
  smallPath: string;
  largePath: string;
}

interface Result {
  requests: number;
  errors: number;
  bytes: number;
  seconds: number;
  p50: number;
  p99: number;
}

const { values } = parseArgs({
  options: {
    role: { type: 'string' },
    target: { type: 'string' },
    upstream: { type: 'string' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    connections: { type: 'string', default: '32' },
    'small-path': { type: 'string', default: '/small' },
    'large-path': { type: 'string', default: '/1m' },
  },
});

if (values.role === 'upstream') {
  await runUpstream();
} else if (values.role === 'proxy') {
  await runProxy(parseHostPort(values.target ?? ''));
} else {
  await main({
    upstream: values.upstream === undefined ? undefined : parseHostPort(values.upstream),
    durationMs: Number(values.duration) * 1000,
    warmupMs: Number(values.warmup) * 1000,
    connections: Number(values.connections),
    smallPath: values['small-path'] ?? '/small',
    largePath: values['large-path'] ?? '/1m',
  });
}

async function main(options: Options): Promise<void> {
  const children: ChildProcess[] = [];
  const stop = (): void => {
    for (const child of children) child.kill();
  };
  process.once('SIGINT', () => {
    stop();
    process.exit(130);
  });
  try {
    let upstream = options.upstream;
    if (upstream === undefined) {
      const child = spawnRole(['--role', 'upstream']);
      children.push(child);
      upstream = { host: '127.0.0.1', port: await portOf(child) };
    }
    const proxyChild = spawnRole(['--role', 'proxy', '--target', `${upstream.host}:${upstream.port}`]);
    children.push(proxyChild);
    const proxyPort = await portOf(proxyChild);

    console.log(
      `upstream ${upstream.host}:${upstream.port}${options.upstream === undefined ? ' (built-in child)' : ''}, ` +
        `proxy 127.0.0.1:${proxyPort} (child), ${options.connections} keep-alive connections, ` +
        `${options.durationMs / 1000} s per run after ${options.warmupMs / 1000} s warm-up\n`,
    );

    const rows: Array<{ body: string; target: string; result: Result }> = [];
    for (const [body, path] of [['small', options.smallPath], ['1 MiB', options.largePath]] as const) {
      const targets = [
        { name: 'direct', host: upstream.host, port: upstream.port, hostHeader: `${upstream.host}:${upstream.port}` },
        { name: 'proxy', host: '127.0.0.1', port: proxyPort, hostHeader: APP_HOST },
      ];
      for (const target of targets) {
        await measure(target.host, target.port, target.hostHeader, path, options.warmupMs, options.connections);
        const result = await measure(target.host, target.port, target.hostHeader, path, options.durationMs, options.connections);
        rows.push({ body, target: target.name, result });
        console.log(`  ${body.padEnd(6)} ${target.name.padEnd(7)} done`);
      }
    }
    printTable(rows);
  } finally {
    stop();
  }
}

/** Keeps `connections` requests in flight for `durationMs`; records each request's latency. */
async function measure(
  host: string,
  port: number,
  hostHeader: string,
  path: string,
  durationMs: number,
  connections: number,
): Promise<Result> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  let errors = 0;
  let bytes = 0;
  const started = performance.now();
  const deadline = started + durationMs;

  const once = (): Promise<void> =>
    new Promise((resolve) => {
      const begin = performance.now();
      const fail = (): void => {
        errors += 1;
        resolve();
      };
      const req = httpRequest({ host, port, path, agent, headers: { host: hostHeader } }, (res) => {
        res.on('data', (chunk: Buffer) => (bytes += chunk.length));
        res.on('error', fail);
        res.on('end', () => {
          if (res.statusCode === 200) latencies.push(performance.now() - begin);
          else errors += 1;
          resolve();
        });
      });
      req.on('error', fail);
      req.end();
    });
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) await once();
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { requests: latencies.length, errors, bytes, seconds, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

function printTable(rows: Array<{ body: string; target: string; result: Result }>): void {
  const header = ['body', 'target', 'req/s', 'p50 ms', 'p99 ms', 'MiB/s', 'errors'];
  const lines = rows.map(({ body, target, result }) => [
    body,
    target,
    (result.requests / result.seconds).toFixed(0),
    result.p50.toFixed(2),
    result.p99.toFixed(2),
    (result.bytes / result.seconds / 1024 / 1024).toFixed(1),
    String(result.errors),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => (line[i] ?? '').length)));
  const format = (cells: string[]): string => cells.map((cell, i) => cell.padStart(widths[i] ?? 0)).join('  ');
  console.log(`\n${format(header)}`);
  for (const line of lines) console.log(format(line));

  console.log('\nproxy / direct:');
  for (const body of new Set(rows.map((row) => row.body))) {
    const direct = rows.find((row) => row.body === body && row.target === 'direct')?.result;
    const proxied = rows.find((row) => row.body === body && row.target === 'proxy')?.result;
    if (direct === undefined || proxied === undefined) continue;
    const rps = proxied.requests / proxied.seconds / (direct.requests / direct.seconds);
    console.log(`  ${body.padEnd(6)} throughput x${rps.toFixed(2)}, p99 x${(proxied.p99 / direct.p99).toFixed(2)}`);
  }
}

function spawnRole(args: string[]): ChildProcess {
  return fork(fileURLToPath(import.meta.url), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

/** Waits for a child's `{ port }` message (10 s at most). */
async function portOf(child: ChildProcess): Promise<number> {
  const timeout = AbortSignal.timeout(10_000);
  const [message] = (await once(child, 'message', { signal: timeout })) as [{ port: number }];
  return message.port;
}

async function listenAndReport(server: Server): Promise<void> {
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  process.send?.({ port: (server.address() as AddressInfo).port });
  // Exit with the parent: an orphaned benchmark server would hold its port forever.
  process.on('disconnect', () => process.exit(0));
}

async function runUpstream(): Promise<void> {
  const small = Buffer.from('hello world');
  const large = Buffer.alloc(1024 * 1024, 'x');
  const server = createServer((req, res) => {
    const body = req.url === '/1m' ? large : small;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
    res.end(body);
  });
  await listenAndReport(server);
}

async function runProxy(upstream: Upstream): Promise<void> {
  const table = new RoutingTable(DOMAIN);
  table.set('app', { kind: 'app', deploymentId: 'bench', state: 'live', upstreams: [upstream] });
  const proxy = new AppProxy({ table, publicProtocol: 'http' });
  const server = createServer((req, res) => {
    if (!proxy.handleRequest(req, res)) res.end('api');
  });
  server.on('upgrade', (req, socket, head: Buffer) => {
    if (!proxy.handleUpgrade(req, socket, head)) socket.destroy();
  });
  await listenAndReport(server);
}

function parseHostPort(value: string): Upstream {
  const colon = value.lastIndexOf(':');
  const port = Number(value.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(port) || port <= 0 || port > 65_535) {
    throw new Error(`expected host:port, got "${value}"`);
  }
  return { host: value.slice(0, colon), port };
}
