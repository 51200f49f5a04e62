// Issue 33 item 4, as a person deploys a folder too large for the server: refused before packing (the
// files) or while packing (the archive), in MiB with what to do, and nothing created, linked or sent.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { ensureBusyboxImage, writeBusyboxApp } from '../helpers/busybox-image.js';
import { cli, type CliResult } from '../helpers/cli.js';
import { upload } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
let server: TestServer;
let work: string;
let home: string;
let token: string;

/** stderr without the packing progress lines (printed when packing takes a while). */
const withoutProgress = (stderr: string): string => stderr.replace(/^packed .*\n/gm, '');

function assertExit(res: CliResult, code: number): void {
  assert.equal(res.code, code, `exit ${res.code}\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`);
}

async function appCount(): Promise<number> {
  return ((await server.request('GET', '/api/v1/deployments', { token })).json as unknown[]).length;
}

/** The small files of an app folder as the refusal lists them: in bytes, never "0 KiB". */
const smallFiles = (dir: string): string => `Dockerfile (${statSync(path.join(dir, 'Dockerfile')).size} B), index.html (13 B)`;

/** A busybox app folder; returns its path. */
async function appFolder(label: string): Promise<string> {
  const dir = path.join(work, `${label}-${randomUUID().slice(0, 6)}`);
  await mkdir(dir);
  await writeBusyboxApp(dir, { body: 'small enough\n' });
  return dir;
}

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-upload-limit-'));
  await ensureBusyboxImage(createDockerEngine());
  server = await startTestServer({ SLIPWAY_MAX_UPLOAD_BYTES: String(MiB), SLIPWAY_MAX_EXPANDED_BYTES: String(16 * MiB) });
  const user = await server.newUser('limit');
  token = user.token;
  home = await mkdtemp(path.join(work, 'home-'));
  assertExit(await cli(['login', '--url', server.url, '--api-key', user.apiKey], { home }), 0);
});
after(async () => {
  const list = await server.request('GET', '/api/v1/deployments', { token }).catch(() => undefined);
  for (const d of (list?.json ?? []) as Array<{ id: string }>) await server.request('DELETE', `/api/v1/deployments/${d.id}`, { token }).catch(() => undefined);
  await server?.close();
  await rm(work, { recursive: true, force: true });
});

test('GET /api/v1/limits says the upload limit and the setting that raises it; it is in the OpenAPI document', async () => {
  const res = await server.request('GET', '/api/v1/limits', { token });
  assert.equal(res.status, 200);
  assert.deepEqual(res.json, { max_upload_bytes: MiB, max_upload_setting: 'SLIPWAY_MAX_UPLOAD_BYTES', max_expanded_bytes: 16 * MiB, max_archive_entries: 100_000 });
  assert.equal((await server.request('GET', '/api/v1/limits')).status, 401);
  const openapi = (await server.request('GET', '/api/v1/openapi.json')).json;
  assert.ok(openapi.paths['/api/v1/limits']?.get, 'documented');
});

test('3 MiB of random data: refused while packing, in MiB, naming the file and what to do; no app, no link file', async () => {
  const dir = await appFolder('random');
  await writeFile(path.join(dir, 'data.bin'), randomBytes(3 * MiB));
  const before = await appCount();
  const res = await cli(['deploy', dir, '--subdomain', `big-${randomUUID().slice(0, 6)}`], { home });
  assertExit(res, 1);
  assert.equal(
    withoutProgress(res.stderr),
    `error: ${dir} packs to more than 1 MiB, this server's upload limit (3 MiB of files before compression; largest: data.bin (3 MiB), ${smallFiles(dir)}): ` +
      "leave files out with .dockerignore (dependencies, build output, data), or ask the operator to raise SLIPWAY_MAX_UPLOAD_BYTES. Nothing was created or uploaded.\n",
  );
  assert.equal(await appCount(), before, 'no app was created');
  assert.equal(existsSync(path.join(dir, 'slipway.json')), false, 'the folder is not linked');

  // What the message says to do works.
  await writeFile(path.join(dir, '.dockerignore'), 'data.bin\n');
  const again = await cli(['deploy', dir, '--subdomain', `big-${randomUUID().slice(0, 6)}`], { home });
  assertExit(again, 0);
});

test('a 40 MiB sparse file: refused before packing (more than the server takes extracted); no app', async () => {
  const dir = await appFolder('sparse');
  await writeFile(path.join(dir, 'disk.img'), '');
  await truncate(path.join(dir, 'disk.img'), 40 * MiB);
  const before = await appCount();
  const res = await cli(['deploy', dir, '--subdomain', `sparse-${randomUUID().slice(0, 6)}`], { home });
  assertExit(res, 1);
  assert.equal(
    withoutProgress(res.stderr),
    `error: ${dir} holds 40 MiB of files to upload, more than this server accepts once extracted (16 MiB; largest: disk.img (40 MiB), ${smallFiles(dir)}): ` +
      'leave files out with .dockerignore, or ask the operator to raise SLIPWAY_MAX_EXPANDED_BYTES. Nothing was created or uploaded.\n',
  );
  assert.equal(await appCount(), before);
});

test('a linked app: an oversize source changes nothing on it and uploads nothing', async () => {
  const dir = await appFolder('linked');
  assertExit(await cli(['deploy', dir, '--subdomain', `linked-${randomUUID().slice(0, 6)}`], { home }), 0);
  const app = (await server.request('GET', '/api/v1/deployments', { token })).json.find((d: { name: string }) => d.name === path.basename(dir));
  const builds = (await server.request('GET', `/api/v1/deployments/${app.id}/builds`, { token })).json.length;
  await writeFile(path.join(dir, 'data.bin'), randomBytes(2 * MiB));
  const res = await cli(['deploy', dir], { home });
  assertExit(res, 1);
  assert.match(res.stderr, /^error: .* packs to more than 1 MiB, this server's upload limit \(2 MiB of files before compression; largest: data\.bin \(2 MiB\)/);
  assert.equal((await server.request('GET', `/api/v1/deployments/${app.id}/builds`, { token })).json.length, builds, 'no new build');
});

test("the server's own refusal, for a client that sends anyway: in MiB, with what to do", async () => {
  const created = await server.request('POST', '/api/v1/deployments', { token, body: { name: 'raw', subdomain: `raw-${randomUUID().slice(0, 6)}`, source_type: 'archive' } });
  const res = await upload(server, token, created.json.id, randomBytes(MiB + 4096));
  assert.equal(res.status, 413);
  assert.deepEqual(res.json, {
    error: 'payload_too_large',
    message: "the archive is larger than this server's upload limit of 1 MiB: leave files out with .dockerignore (dependencies, build output, data), or ask the operator to raise SLIPWAY_MAX_UPLOAD_BYTES",
  });
});
