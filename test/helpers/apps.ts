// Test factory for deployed apps: archives from folders, uploads, deploys, and requests through the router.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import type { ContainerEngine } from '../../src/runtime/engine.js';
import { ensureBusyboxImage, writeBusyboxApp, writeBusyboxScriptApp, type BusyboxAppOptions } from './busybox-image.js';
import type { HttpResult, TestServer } from './server.js';

/** The engine the tests share (the local one). */
export function testEngine(): ContainerEngine {
  return createDockerEngine();
}

/** A fresh temp folder. */
export function tempDir(label = 'app'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `slipway-${label}-`));
}

/** Packs a folder as tar.gz in memory (test sources are tiny). */
export async function tarGzOf(dir: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const stream = tar.c({ cwd: dir, gzip: true, portable: true }, await fsp.readdir(dir));
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** A busybox httpd app packed as tar.gz; resolves with the archive and the body it serves. */
export async function busyboxArchive(options: BusyboxAppOptions & { extraDockerfile?: string } = {}): Promise<{ archive: Buffer; body: string }> {
  await ensureBusyboxImage(testEngine());
  const dir = tempDir();
  const body = await writeBusyboxApp(dir, options);
  if (options.extraDockerfile !== undefined) {
    const file = path.join(dir, options.dockerfilePath ?? 'Dockerfile');
    const lines = (await fsp.readFile(file, 'utf8')).split('\n');
    lines.splice(1, 0, options.extraDockerfile);
    await fsp.writeFile(file, lines.join('\n'));
  }
  const archive = await tarGzOf(dir);
  await fsp.rm(dir, { recursive: true, force: true });
  return { archive, body };
}

/**
 * A busybox app that runs `script` with /bin/sh -c (see writeBusyboxScriptApp), packed as tar.gz;
 * builds the busybox base first if it is missing.
 */
export async function busyboxScriptArchive(script: string, options: { index?: string } = {}): Promise<Buffer> {
  await ensureBusyboxImage(testEngine());
  const dir = tempDir('busybox-script');
  try {
    await writeBusyboxScriptApp(dir, script, options);
    return await tarGzOf(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** Uploads an archive (and optional Dockerfile text) to a deployment. */
export async function upload(ts: Pick<TestServer, 'request'>, token: string, id: string, archive: Buffer, dockerfile?: string): Promise<HttpResult> {
  const form = new FormData();
  form.append('archive', new Blob([archive], { type: 'application/gzip' }), 'source.tar.gz');
  if (dockerfile !== undefined) form.append('dockerfile', dockerfile);
  return ts.request('POST', `/api/v1/deployments/${id}/upload`, { token, raw: form });
}

let subdomainCounter = 0;
/** A subdomain unique to this test process. */
export function uniqueSubdomain(label = 'app'): string {
  subdomainCounter += 1;
  return `${label}-${process.pid}-${subdomainCounter}`;
}

/** Creates an archive deployment and uploads `archive`; resolves with the deployment id and subdomain. */
export async function createArchiveApp(ts: Pick<TestServer, 'request'>, token: string, archive: Buffer, extra: Record<string, unknown> = {}): Promise<{ id: string; subdomain: string }> {
  const subdomain = uniqueSubdomain();
  const created = await ts.request('POST', '/api/v1/deployments', {
    token,
    body: { name: subdomain, subdomain, source_type: 'archive', ...extra },
  });
  if (created.status !== 201) throw new Error(`create failed: ${created.status} ${created.text}`);
  const id = created.json.id as string;
  const uploaded = await upload(ts, token, id, archive);
  if (uploaded.status !== 200) throw new Error(`upload failed: ${uploaded.status} ${uploaded.text}`);
  return { id, subdomain };
}

/** Triggers a deploy and waits for its end (`?wait=true`). */
export function deployAndWait(ts: Pick<TestServer, 'request'>, token: string, id: string): Promise<HttpResult> {
  return ts.request('POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
}

/** GET through the router: a request to the server's port with `Host: <subdomain>.localhost`. */
export function appRequest(
  port: number,
  subdomain: string,
  options: { path?: string; method?: string; body?: string; agent?: http.Agent; timeoutMs?: number; address?: string } = {},
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: options.address ?? '127.0.0.1',
        port,
        path: options.path ?? '/',
        method: options.method ?? 'GET',
        headers: { host: `${subdomain}.localhost:${port}` },
        agent: options.agent ?? false,
        timeout: options.timeoutMs ?? 10_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Polls `check` until it returns a value (not undefined) or the timeout passes. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 30_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last === undefined ? '' : `: ${String(last)}`}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
