// Test images without a registry: a busybox base built FROM scratch, and tiny httpd apps on top.
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { BuildSandbox, ContainerEngine } from '../../src/runtime/engine.js';

/** The base image every test app builds FROM. */
export const BUSYBOX_IMAGE = 'slipway-test/busybox:latest';
/** Label on the base image (not LABEL_MANAGED, so Slipway's own clean-ups never remove it). */
export const LABEL_TEST_BASE = 'dev.slipway.test-base';

const BUSYBOX_BINARY = '/bin/busybox';

/** The sandbox of test image builds: no network (they need none), generous limits. */
export const TEST_BUILD_SANDBOX: BuildSandbox = {
  network: { mode: 'none' },
  memoryBytes: 1024 * 1024 * 1024,
  nanoCpus: 2_000_000_000,
  pidsLimit: 1024,
};

/**
 * Builds `slipway-test/busybox:latest` unless it exists; resolves with its name. Safe when several
 * test processes call it at once: each build gets the same content, and the tag simply points at
 * the last one to finish (the engine's layer cache usually makes them the same image).
 */
export async function ensureBusyboxImage(engine: ContainerEngine): Promise<string> {
  if (await engine.imageExists(BUSYBOX_IMAGE)) return BUSYBOX_IMAGE;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'slipway-busybox-'));
  try {
    await copyFile(BUSYBOX_BINARY, path.join(dir, 'busybox'));
    await writeFile(
      path.join(dir, 'Dockerfile'),
      ['FROM scratch', 'COPY busybox /bin/busybox', 'RUN ["/bin/busybox","--install","-s","/bin"]', ''].join('\n'),
    );
    return await buildTestBaseImage(engine, dir, BUSYBOX_IMAGE, 120_000);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Builds a test base image from `contextDir` (its `Dockerfile`), labelled so Slipway's clean-ups
 * never remove it; a failure carries the build output.
 */
export async function buildTestBaseImage(engine: ContainerEngine, contextDir: string, tag: string, timeoutMs: number): Promise<string> {
  let output = '';
  await engine
    .buildImage({
      contextDir,
      dockerfile: 'Dockerfile',
      tag,
      labels: { [LABEL_TEST_BASE]: 'true' },
      signal: AbortSignal.timeout(timeoutMs),
      sandbox: TEST_BUILD_SANDBOX,
      onOutput: (text) => {
        output += text;
      },
    })
    .catch((err: unknown) => {
      throw new Error(`could not build ${tag}:\n${output.slice(-4000)}`, { cause: err });
    });
  return tag;
}

export interface BusyboxAppOptions {
  /** What GET / answers (index.html). Default: a line naming a random value. */
  body?: string;
  /** The port EXPOSEd; the app listens on $PORT, falling back to this. Default 8080. */
  port?: number;
  /** The app prints a line and exits with code 3 at once instead of serving. */
  exitAtOnce?: boolean;
  /** Seconds the app waits before it listens (as a slower app's start-up would). Default 0. */
  listenDelaySeconds?: number;
  /** Where the Dockerfile goes, relative to dir. Default `Dockerfile`. */
  dockerfilePath?: string;
}

/**
 * Writes a build context into `dir`: a Dockerfile FROM the busybox base that serves `body` with
 * busybox httpd on $PORT (printing `listening on <port>` first) and EXPOSEs `port`.
 * Needs ensureBusyboxImage first. Resolves with the body the app will serve.
 */
export async function writeBusyboxApp(dir: string, options: BusyboxAppOptions = {}): Promise<string> {
  const body = options.body ?? `hello from slipway ${randomUUID()}\n`;
  const port = options.port ?? 8080;
  const script = options.exitAtOnce === true
    ? 'echo "exiting at once"; exit 3'
    : `${(options.listenDelaySeconds ?? 0) > 0 ? `sleep ${options.listenDelaySeconds}; ` : ''}echo "listening on \${PORT:-${port}}"; exec httpd -f -v -p "\${PORT:-${port}}" -h /www`;
  const dockerfile = [
    `FROM ${BUSYBOX_IMAGE}`,
    'COPY index.html /www/index.html',
    `EXPOSE ${port}`,
    `CMD ${JSON.stringify(['/bin/sh', '-c', script])}`,
    '',
  ].join('\n');
  const dockerfilePath = path.join(dir, options.dockerfilePath ?? 'Dockerfile');
  await mkdir(path.dirname(dockerfilePath), { recursive: true });
  await writeFile(dockerfilePath, dockerfile);
  await writeFile(path.join(dir, 'index.html'), body);
  return body;
}

/**
 * Writes a build context into `dir` whose app is one shell script: a Dockerfile FROM the busybox
 * base that EXPOSEs 8080 and runs `script` with /bin/sh -c. `index`: a page copied to
 * /www/index.html (none by default). Needs ensureBusyboxImage first.
 */
export async function writeBusyboxScriptApp(dir: string, script: string, options: { index?: string } = {}): Promise<void> {
  const dockerfile = [
    `FROM ${BUSYBOX_IMAGE}`,
    ...(options.index === undefined ? [] : ['COPY index.html /www/index.html']),
    'EXPOSE 8080',
    `CMD ${JSON.stringify(['/bin/sh', '-c', script])}`,
    '',
  ].join('\n');
  await writeFile(path.join(dir, 'Dockerfile'), dockerfile);
  if (options.index !== undefined) await writeFile(path.join(dir, 'index.html'), options.index);
}
