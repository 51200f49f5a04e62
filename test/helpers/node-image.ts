// Test image with Node.js and no registry: the host's node binary and its shared libraries, FROM scratch.
import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ContainerEngine } from '../../src/runtime/engine.js';
import { buildTestBaseImage, ensureBusyboxImage } from './busybox-image.js';
import { PROJECT_ROOT } from './server.js';

const run = promisify(execFile);

/** The base image of Node test apps (busybox plus node). */
export const NODE_IMAGE = 'slipway-test/node:latest';

/** Builds `slipway-test/node:latest` unless it exists. */
export async function ensureNodeImage(engine: ContainerEngine): Promise<string> {
  if (await engine.imageExists(NODE_IMAGE)) return NODE_IMAGE;
  const base = await ensureBusyboxImage(engine);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'slipway-node-image-'));
  try {
    const rootfs = path.join(dir, 'rootfs');
    const nodeBinary = process.execPath;
    const { stdout } = await run('ldd', ['--', nodeBinary]);
    const libs = [...stdout.matchAll(/(\/[^\s]+\.so[^\s]*)/g)].map((m) => m[1] as string);
    for (const file of [nodeBinary, ...libs]) {
      const target = path.join(rootfs, file);
      await mkdir(path.dirname(target), { recursive: true });
      await copyFile(file, target);
    }
    if (nodeBinary !== '/usr/bin/node') {
      await mkdir(path.join(rootfs, 'usr', 'bin'), { recursive: true });
      await copyFile(nodeBinary, path.join(rootfs, 'usr', 'bin', 'node'));
    }
    await writeFile(path.join(dir, 'Dockerfile'), [`FROM ${base}`, 'COPY rootfs/ /', ''].join('\n'));
    return await buildTestBaseImage(engine, dir, NODE_IMAGE, 300_000);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Writes a Node WebSocket echo app (using the project's own `ws` package) into `dir`. */
export async function writeWebSocketEchoApp(dir: string): Promise<void> {
  await cp(path.join(PROJECT_ROOT, 'node_modules', 'ws'), path.join(dir, 'node_modules', 'ws'), { recursive: true });
  await writeFile(
    path.join(dir, 'server.cjs'),
    [
      "const http = require('node:http');",
      "const { WebSocketServer } = require('ws');",
      "const server = http.createServer((req, res) => res.end('ws echo app\\n'));",
      'const wss = new WebSocketServer({ server });',
      "wss.on('connection', (socket, req) => socket.on('message', (data, isBinary) => socket.send(isBinary ? data : 'echo:' + data.toString())));",
      "server.listen(Number(process.env.PORT), () => console.log('listening on ' + process.env.PORT));",
      "process.on('SIGTERM', () => process.exit(0));",
      '',
    ].join('\n'),
  );
  await writeFile(
    path.join(dir, 'Dockerfile'),
    [`FROM ${NODE_IMAGE}`, 'WORKDIR /app', 'COPY . /app', 'EXPOSE 3000', 'CMD ["/usr/bin/node", "/app/server.cjs"]', ''].join('\n'),
  );
}
