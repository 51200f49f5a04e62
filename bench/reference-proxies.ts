// Throwaway reverse proxies on loopback, as reference rows in bench/router: Debian's nginx (installed the way
// `npm start` installs haproxy, its system service kept off) and a bare HAProxy; each with its config in a temp dir, in the foreground.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { freePort } from '../test/helpers/net.js';
import { PROJECT_ROOT } from '../test/helpers/server.js';

export const NGINX_BIN = '/usr/sbin/nginx';

/** Installs Debian's nginx when it is missing (root, apt-get), without starting its system service. */
export async function ensureNginx(): Promise<void> {
  if (fs.existsSync(NGINX_BIN)) return;
  // scripts/setup.mjs is plain JavaScript shared by `npm start` and `npm test`, outside the compiled tree.
  const setup = (await import(pathToFileURL(path.join(PROJECT_ROOT, 'scripts', 'setup.mjs')).href)) as {
    aptInstallServices(packages: string[], services: string[]): boolean;
  };
  if (!setup.aptInstallServices(['nginx'], ['nginx']) || !fs.existsSync(NGINX_BIN)) {
    throw new Error('nginx is not installed and could not be (Debian: apt-get install nginx)');
  }
}

export interface ReferenceProxy {
  /** The loopback port the proxy listens on. */
  readonly port: number;
  /** The one process that does all the proxy's work (HAProxy); undefined when workers do it (nginx). */
  readonly workerPid: number | undefined;
  /** Stops the proxy and removes its folder (idempotent). */
  stop(): Promise<void>;
}

/**
 * Starts nginx on a free 127.0.0.1 port proxying every request to 127.0.0.1:`upstreamPort`, streaming
 * responses (proxy_buffering off, as HAProxy and the Node plane do) with as many workers as CPUs.
 */
export async function startNginxProxy(upstreamPort: number): Promise<ReferenceProxy> {
  return startReferenceProxy('nginx', (dir, port) => {
    const file = path.join(dir, 'nginx.conf');
    const temp = (name: string): string => `${name}_temp_path ${path.join(dir, name)};`;
    fs.writeFileSync(
      file,
      [
        'worker_processes auto;',
        `pid ${path.join(dir, 'nginx.pid')};`,
        'error_log stderr warn;',
        'events { worker_connections 1024; }',
        'http {',
        '  access_log off;',
        `  ${temp('client_body')} ${temp('proxy')} ${temp('fastcgi')} ${temp('uwsgi')} ${temp('scgi')}`,
        `  upstream app { server 127.0.0.1:${upstreamPort}; keepalive 32; }`,
        '  server {',
        `    listen 127.0.0.1:${port};`,
        '    location / {',
        '      proxy_pass http://app;',
        '      proxy_http_version 1.1;',
        '      proxy_set_header Connection "";',
        '      proxy_set_header Host $host;',
        '      proxy_buffering off;',
        '    }',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    // -e: the error log before the config is read (Debian's default is /var/log/nginx); -p: the prefix for relative paths.
    return [NGINX_BIN, ['-p', dir, '-e', 'stderr', '-c', file, '-g', 'daemon off;']];
  });
}

/**
 * Starts HAProxy with the least configuration that proxies 127.0.0.1:`upstreamPort` (HAProxy's defaults:
 * keep-alive on both sides, `http-reuse safe`) on `threads` threads: what an edge costs before any rule of Slipway's.
 */
export async function startBareHaproxy(binary: string, upstreamPort: number, threads: number): Promise<ReferenceProxy> {
  return startReferenceProxy('haproxy', (dir, port) => {
    const file = path.join(dir, 'haproxy.cfg');
    fs.writeFileSync(
      file,
      [
        'global',
        `  nbthread ${threads}`,
        'defaults',
        '  mode http',
        '  timeout connect 5s',
        '  timeout client 30s',
        '  timeout server 60s',
        'frontend public',
        `  bind 127.0.0.1:${port}`,
        '  default_backend app',
        'backend app',
        `  server app 127.0.0.1:${upstreamPort}`,
        '',
      ].join('\n'),
    );
    return [binary, ['-db', '-f', file]];
  }, true);
}

/** Runs the proxy `command` gives (binary and arguments, its config written into `dir`) on a free port until it accepts connections. */
async function startReferenceProxy(name: string, command: (dir: string, port: number) => [string, string[]], singleProcess = false): Promise<ReferenceProxy> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-bench-${name}-`));
  let child: ReturnType<typeof spawn> | undefined;
  const stop = async (): Promise<void> => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child?.once('exit', () => resolve()));
      child.kill('SIGTERM'); // a fast shutdown for both
      const bound = setTimeout(() => child?.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(bound);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const port = await freePort();
    const [binary, args] = command(dir, port);
    child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const deadline = Date.now() + 15_000;
    while (!(await accepts(port))) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited: ${stderr.trim()}`);
      if (Date.now() > deadline) throw new Error(`${name} did not listen within 15 s: ${stderr.trim()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return { port, workerPid: singleProcess ? child.pid : undefined, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Whether 127.0.0.1:`port` accepts a connection (1 s bound). */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.setTimeout(1000);
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}
