// Issue 33 item 12, as a person deploys an app that listens on its own port: the start fails as soon
// as the app's output names another port than PORT, saying both, instead of after the whole wait.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { ensureBusyboxImage, writeBusyboxScriptApp } from '../helpers/busybox-image.js';
import { cli, type CliResult } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
let work: string;
let home: string;

function assertExit(res: CliResult, code: number): void {
  assert.equal(res.code, code, `exit ${res.code}\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`);
}

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-wrong-port-'));
  await ensureBusyboxImage(createDockerEngine());
  // A start timeout far longer than the test waits: only the early end can finish it in time.
  server = await startTestServer({ SLIPWAY_STARTUP_TIMEOUT_SECONDS: '600' });
  home = await mkdtemp(path.join(work, 'home-'));
  assertExit(await cli(['login', '--url', server.url, '--api-key', (await server.newUser('port')).apiKey], { home }), 0);
});
after(async () => {
  await server?.close();
  await rm(work, { recursive: true, force: true });
});

test('an app that prints "listening on :3000" while PORT is 8080: the build fails naming both ports and what to do', async () => {
  const dir = path.join(work, `port-${randomUUID().slice(0, 6)}`);
  await mkdir(dir);
  await writeBusyboxScriptApp(dir, 'echo "listening on :3000"; exec httpd -f -p 3000 -h /www', { index: 'hello\n' });
  const res = await cli(['deploy', dir, '--subdomain', `port-${randomUUID().slice(0, 6)}`], { home });
  assertExit(res, 1);
  assert.match(res.stdout, /^listening on :3000$/m);
  assert.match(
    res.stderr,
    /^error: build [0-9a-f]{8} failed: the app says it listens on port 3000, but its PORT is 8080: make it listen on the port in the PORT environment variable \(or EXPOSE 3000 alone in the Dockerfile, so PORT is 3000\); its last line: listening on :3000$/m,
  );
});
