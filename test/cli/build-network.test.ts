// Issue 33 item 3, as a person deploys: a build that needs the network is told at once and fails
// at once with the reason; the engine's "(HTTP code 400) unexpected -" and terminal colours never show.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { cli, type CliResult } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let confined: TestServer;
let offline: TestServer;
let work: string;
let confinedHome: string;
let offlineHome: string;

function assertExit(res: CliResult, code: number): void {
  assert.equal(res.code, code, `exit ${res.code}\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`);
}

/** A folder whose Dockerfile is `FROM busybox` plus `lines`. */
async function folder(lines: string): Promise<string> {
  const dir = path.join(work, `app-${randomUUID().slice(0, 8)}`);
  await mkdir(dir);
  await writeFile(path.join(dir, 'Dockerfile'), `FROM ${BUSYBOX_IMAGE}\n${lines}\n`);
  return dir;
}

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'slipway-build-network-'));
  await ensureBusyboxImage(createDockerEngine());
  [confined, offline] = await Promise.all([startTestServer(), startTestServer({ SLIPWAY_BUILD_NETWORK: 'none' })]);
  confinedHome = await mkdtemp(path.join(work, 'home-'));
  offlineHome = await mkdtemp(path.join(work, 'home-'));
  assertExit(await cli(['login', '--url', confined.url, '--api-key', (await confined.newUser('net')).apiKey], { home: confinedHome }), 0);
  assertExit(await cli(['login', '--url', offline.url, '--api-key', (await offline.newUser('net')).apiKey], { home: offlineHome }), 0);
});
after(async () => {
  await Promise.all([confined?.close(), offline?.close()]);
  await rm(work, { recursive: true, force: true });
});

test('SLIPWAY_BUILD_NETWORK=none: the log says builds have no network before the build runs, and the failure says what to do', async () => {
  const dir = await folder('RUN wget -O- http://deps.slipway-test.invalid/pkg.tgz');
  const res = await cli(['deploy', dir, '--subdomain', `nonet-${randomUUID().slice(0, 6)}`], { home: offlineHome });
  assertExit(res, 1);
  const notice = '==> builds have no network access (SLIPWAY_BUILD_NETWORK=none): RUN steps cannot download anything\n';
  assert.ok(res.stdout.includes(notice), res.stdout);
  assert.ok(res.stdout.indexOf(notice) < res.stdout.indexOf('Step 1/'), 'said before the first step runs');
  assert.match(res.stdout, /wget: bad address 'deps\.slipway-test\.invalid'/);
  assert.match(
    res.stderr,
    /^error: build [0-9a-f]{8} failed: image build failed: The command '\/bin\/sh -c wget -O- http:\/\/deps\.slipway-test\.invalid\/pkg\.tgz' returned a non-zero code: 1 \(wget: bad address 'deps\.slipway-test\.invalid'\); builds have no network access: vendor the dependency or use a base image that has it$/m,
  );
});

test('the default confined network: a lookup through a private resolver is refused at once, and the failure says what builds reach', async () => {
  // 10.0.0.1 is on a private network: the build firewall refuses it (it used to drop it, and the
  // step then waited for the kernel's timeouts).
  const dir = await folder('RUN nslookup deps.slipway-test.invalid 10.0.0.1');
  const res = await cli(['deploy', dir, '--subdomain', `confnet-${randomUUID().slice(0, 6)}`], { home: confinedHome });
  assertExit(res, 1);
  assert.ok(
    res.stdout.includes('==> builds have no network access beyond public internet addresses: RUN steps never reach this server, its private networks or other apps\n'),
    res.stdout,
  );
  assert.match(res.stdout, /nslookup: write to '10\.0\.0\.1': Connection refused/);
  assert.match(
    res.stderr,
    /^error: build [0-9a-f]{8} failed: image build failed: The command '\/bin\/sh -c nslookup deps\.slipway-test\.invalid 10\.0\.0\.1' returned a non-zero code: 1 \(.+\); builds have no network access beyond public internet addresses \(none when this server is offline; never this server, its private networks or other apps\): vendor the dependency or use a base image that has it$/m,
  );
});

test('a failure unrelated to the network carries no network hint', async () => {
  const dir = await folder('RUN echo compiling && exit 3');
  const res = await cli(['deploy', dir, '--subdomain', `plain-${randomUUID().slice(0, 6)}`], { home: confinedHome });
  assertExit(res, 1);
  assert.match(res.stderr, /^error: build [0-9a-f]{8} failed: image build failed: The command '\/bin\/sh -c echo compiling && exit 3' returned a non-zero code: 3$/m);
});

test("a Dockerfile the engine cannot parse: the engine's words without dockerode's \"(HTTP code 400) unexpected -\"", async () => {
  const dir = await folder('FOO bar');
  const res = await cli(['deploy', dir, '--subdomain', `parse-${randomUUID().slice(0, 6)}`], { home: confinedHome });
  assertExit(res, 1);
  assert.match(res.stderr, /^error: build [0-9a-f]{8} failed: image build failed: dockerfile parse error line 2: unknown instruction: FOO$/m);
  assert.doesNotMatch(res.stdout + res.stderr, /HTTP code|unexpected -/);
});

test('colours a RUN step prints (and the builder adds around its stderr) are not in the log the CLI pipes or the API serves', async () => {
  const dir = await folder(`RUN printf '\\033[1;31mred\\033[0m plain\\n' && echo 'to stderr' >&2\nCMD ["true"]`);
  const res = await cli(['deploy', dir, '--subdomain', `ansi-${randomUUID().slice(0, 6)}`, '--no-follow'], { home: confinedHome });
  assertExit(res, 0);
  const buildId = res.stdout.trim();
  const logs = await cli(['logs', path.basename(dir), '--build', buildId.slice(0, 8), '-f'], { home: confinedHome });
  assert.match(logs.stdout, /^red plain$/m);
  assert.match(logs.stdout, /^to stderr$/m);
  assert.doesNotMatch(logs.stdout, /\u001b/, 'no escape character reaches a pipe');
});
