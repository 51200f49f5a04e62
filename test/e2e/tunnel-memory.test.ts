// The attack of issue 23 item 2: many concurrent uploads to a live tunnel whose app reads slowly must not pile up in the server's memory, on either data plane.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { runTunnelClient } from '../../src/tunnel/tunnel-client.js';
import { PLANES } from '../helpers/planes.js';
import { childPids, mib, sampleRss } from '../helpers/process-memory.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

const MiB = 1024 * 1024;
const DOMAIN = 'tunnels.test';
/** Concurrent uploads, and the size of each: 400 MiB in all, far above the bound. */
const UPLOADS = 50;
const UPLOAD_BYTES = 8 * MiB;
/** Goal of the issue: the server's RSS stays within this of where it was, however many uploads. */
const MAX_GROWTH = 64 * MiB;

/** A body of `total` bytes produced only as fast as it is consumed; `produced` counts what left. */
function body(total: number, counter: { produced: number }): Readable {
  const block = Buffer.alloc(64 * 1024, 0x61);
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= total) return void this.push(null);
      const n = Math.min(block.length, total - sent);
      sent += n;
      counter.produced += n;
      this.push(Buffer.from(block.subarray(0, n)));
    },
  });
}

/** One POST of `total` bytes to the tunnel's host; resolves with the status and the app's answer. */
function upload(port: number, host: string, total: number, counter: { produced: number }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/upload', agent: false, headers: { host, 'content-length': String(total) } });
    req.setTimeout(120_000, () => req.destroy(new Error('no answer within 120 s')));
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    body(total, counter).pipe(req);
  });
}

for (const plane of PLANES) describe(`tunnel uploads are back-pressured, not buffered (${plane} data plane)`, () => {
  let dir: string;
  let server: ServerProcess;
  let worker: number;
  let local: http.Server;
  /** Requests the app holds without reading, released together. */
  let held: Array<() => void> = [];
  let holding = true;
  const stop = new AbortController();
  let host: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-tunnel-memory-'));
    server = await spawnServerProcess(testEnv(dir, { SLIPWAY_DOMAIN: DOMAIN, SLIPWAY_DATA_PLANE: plane }));
    const workers = childPids(server.child.pid ?? 0);
    assert.equal(workers.length, 1, `the supervisor has one worker: ${workers.join(', ')}`);
    worker = workers[0] as number;
    // The app behind the tunnel: counts each upload; while holding, it does not read a byte of it.
    local = http.createServer((req, res) => {
      let bytes = 0;
      const read = (): void => {
        req.on('data', (chunk: Buffer) => (bytes += chunk.length));
        req.on('end', () => res.end(JSON.stringify({ bytes })));
        req.resume();
      };
      if (holding) {
        req.pause();
        held.push(read);
      } else {
        read();
      }
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', () => resolve()));
    const token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const key = await request(server.url, 'POST', '/api/v1/api-keys', { token, body: { name: 'tunnel-memory' } });
    assert.equal(key.status, 201, key.text);
    const connected = new Promise<string>((resolve, reject) => {
      setTimeout(() => reject(new Error('the tunnel did not connect within 30 s')), 30_000).unref();
      void runTunnelClient({
        serverUrl: server.url,
        apiKey: key.json.key as string,
        port: (local.address() as AddressInfo).port,
        subdomain: `memory-${process.pid}`,
        signal: stop.signal,
        onEvent: (event) => {
          if (event.type === 'connected') resolve(event.subdomain);
        },
      }).catch(() => undefined);
    });
    host = `${await connected}.${DOMAIN}`;
  });
  after(async () => {
    stop.abort();
    for (const release of held) release();
    local.closeAllConnections();
    local.close();
    await server.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test(`${UPLOADS} concurrent ${UPLOAD_BYTES / MiB} MiB uploads to an app that reads slowly: server RSS grows less than ${MAX_GROWTH / MiB} MiB`, async (t) => {
    // Warm up (the first requests through the tunnel allocate what every later one reuses).
    holding = false;
    const deadline = Date.now() + 30_000;
    for (let ok = 0; ok < 3; ) {
      const answer = await upload(server.port, host, MiB, { produced: 0 }).catch(() => ({ status: 0, text: '' }));
      if (answer.status === 200) ok++;
      else if (Date.now() > deadline) assert.fail(`the tunnel's host does not answer: ${answer.status} ${answer.text}`);
      else await sleep(100);
    }
    holding = true;

    const rss = sampleRss(worker);
    const counter = { produced: 0 };
    try {
      const uploads = Array.from({ length: UPLOADS }, () => upload(server.port, host, UPLOAD_BYTES, counter));
      // Every upload reaches the app, and the visitors send until back-pressure stops them (or the
      // server takes in what the app does not read: then its RSS passes the bound and we stop early).
      // The kernel's socket buffers on loopback may hold several MiB per connection: not the server's.
      let last = -1;
      let still = 0;
      const until = Date.now() + 60_000;
      while (!(held.length === UPLOADS && still >= 4) && rss.peakGrowth() < MAX_GROWTH) {
        if (Date.now() > until) assert.fail(`the uploads did not settle: ${held.length} reached the app, ${mib(counter.produced)} sent`);
        await sleep(250);
        still = counter.produced === last ? still + 1 : 0;
        last = counter.produced;
      }
      const heldGrowth = rss.peakGrowth();
      t.diagnostic(`app holding: ${held.length} uploads at the app, ${mib(counter.produced)} sent by the visitors, server RSS +${mib(heldGrowth)}`);
      assert.ok(heldGrowth < MAX_GROWTH, `while the app held the uploads the server's RSS grew ${mib(heldGrowth)} (visitors had sent ${mib(counter.produced)})`);

      // The app reads now: every upload arrives whole, and the server's memory stays bounded throughout.
      holding = false;
      for (const release of held.splice(0)) release();
      const answers = await Promise.all(uploads);
      for (const answer of answers) {
        assert.equal(answer.status, 200, answer.text);
        assert.deepEqual(JSON.parse(answer.text), { bytes: UPLOAD_BYTES });
      }
      const growth = rss.peakGrowth();
      t.diagnostic(`server RSS ${mib(rss.start)} at the start, peak growth ${mib(growth)}`);
      assert.ok(growth < MAX_GROWTH, `the server's RSS grew ${mib(growth)} for ${UPLOADS} uploads of ${mib(UPLOAD_BYTES)}`);
    } finally {
      rss.stop();
    }
  });
});
