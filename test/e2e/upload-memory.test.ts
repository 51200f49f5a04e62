// The attack of issue 23 item 3: an upload sent as fast as loopback allows is streamed to disk, not held in the server's memory, on either data plane.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { PLANES } from '../helpers/planes.js';
import { childPids, mib, sampleRss } from '../helpers/process-memory.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

const MiB = 1024 * 1024;
/** The archive's one file: big enough that holding it would show, small enough to stay quick. */
const FILE_BYTES = 300 * MiB;
/** What the server may grow by while it receives, stores and extracts it: a third of the body. */
const MAX_GROWTH = 100 * MiB;
/** Largest stored (uncompressed) deflate block. */
const STORED_BLOCK = 65_535;

/** A ustar header for one regular file. */
function tarHeader(name: string, size: number): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0);
  header.write('0000644\0', 100);
  header.write('0000000\0', 108);
  header.write('0000000\0', 116);
  header.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  header.write('00000000000\0', 136);
  header.write('        ', 148);
  header.write('0', 156);
  header.write('ustar\0', 257);
  header.write('00', 263);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return header;
}

/**
 * A .tar.gz of one random file of `size` bytes (a multiple of 512), made of stored deflate blocks
 * so it costs no compression: produced as fast as it is written, with its length known up front.
 */
function storedTarGz(size: number): { length: number; chunks(): Generator<Buffer> } {
  const block = randomBytes(MiB);
  const tarLength = 512 + size + 1024;
  const blocks = Math.ceil(tarLength / STORED_BLOCK);
  function* tar(): Generator<Buffer> {
    yield tarHeader('big.bin', size);
    for (let sent = 0; sent < size; sent += MiB) yield block.subarray(0, Math.min(MiB, size - sent));
    yield Buffer.alloc(1024);
  }
  /** Stored blocks per chunk written: about 1 MiB at a time, so the client is never the slow side. */
  const perChunk = 16;
  function* chunks(): Generator<Buffer> {
    yield Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    let crc = 0;
    let out = Buffer.allocUnsafe(perChunk * (STORED_BLOCK + 5));
    let at = 0;
    let fill = 0;
    let emitted = 0;
    /** Closes the stored block being filled (its 5-byte head was reserved before its data). */
    const close = (final: boolean): void => {
      const start = at - fill - 5;
      out.writeUInt8(final ? 1 : 0, start);
      out.writeUInt16LE(fill, start + 1);
      out.writeUInt16LE(~fill & 0xffff, start + 3);
      fill = 0;
      emitted++;
    };
    for (const piece of tar()) {
      crc = crc32(piece, crc);
      let rest = piece;
      while (rest.length > 0) {
        if (fill === 0) at += 5;
        const take = Math.min(rest.length, STORED_BLOCK - fill);
        rest.copy(out, at, 0, take);
        at += take;
        fill += take;
        rest = rest.subarray(take);
        if (fill === STORED_BLOCK && emitted < blocks - 1) {
          close(false);
          if (at + STORED_BLOCK + 5 > out.length) {
            yield out.subarray(0, at);
            out = Buffer.allocUnsafe(out.length);
            at = 0;
          }
        }
      }
    }
    close(true);
    const trailer = Buffer.alloc(8);
    trailer.writeUInt32LE(crc >>> 0, 0);
    trailer.writeUInt32LE(tarLength >>> 0, 4);
    yield Buffer.concat([out.subarray(0, at), trailer]);
  }
  return { length: 10 + blocks * 5 + tarLength + 8, chunks };
}

for (const plane of PLANES) describe(`uploads are streamed to disk at full speed (${plane} data plane)`, () => {
  let dir: string;
  let server: ServerProcess;
  let worker: number;
  let token: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-upload-memory-'));
    server = await spawnServerProcess(
      testEnv(dir, { SLIPWAY_DATA_PLANE: plane, SLIPWAY_MAX_UPLOAD_BYTES: String(FILE_BYTES + 16 * MiB), SLIPWAY_MAX_EXPANDED_BYTES: String(FILE_BYTES + 16 * MiB) }),
    );
    const workers = childPids(server.child.pid ?? 0);
    assert.equal(workers.length, 1, `the supervisor has one worker: ${workers.join(', ')}`);
    worker = workers[0] as number;
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  });
  after(async () => {
    await server.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test(`a ${FILE_BYTES / MiB} MiB archive sent as fast as loopback allows: server RSS grows less than ${MAX_GROWTH / MiB} MiB`, async (t) => {
    const created = await request(server.url, 'POST', '/api/v1/deployments', { token, body: { name: `big-${plane}`, subdomain: `big-${plane}-${process.pid}`, source_type: 'archive' } });
    assert.equal(created.status, 201, created.text);
    const archive = storedTarGz(FILE_BYTES);
    const boundary = `----slipway-memory-${randomBytes(8).toString('hex')}`;
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="archive"; filename="big.tar.gz"\r\nContent-Type: application/gzip\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);

    const rss = sampleRss(worker);
    try {
      const req = http.request({
        host: '127.0.0.1',
        port: server.port,
        method: 'POST',
        path: `/api/v1/deployments/${created.json.id as string}/upload`,
        agent: false,
        headers: { authorization: `Bearer ${token}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + archive.length + tail.length) },
      });
      req.setTimeout(180_000, () => req.destroy(new Error('no answer within 180 s')));
      const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
        req.on('error', reject);
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        });
      });
      // As fast as the server takes it: the only pause is the socket's own back-pressure.
      req.write(head);
      for (const chunk of archive.chunks()) if (!req.write(chunk)) await Promise.race([once(req, 'drain'), answered]);
      req.end(tail);
      const sent = rss.peakGrowth();
      const answer = await answered;
      assert.equal(answer.status, 200, answer.text);
      assert.deepEqual(JSON.parse(answer.text), { status: 'uploaded', size: archive.length });
      const growth = rss.peakGrowth();
      t.diagnostic(`server RSS ${mib(rss.start)} at the start, peak growth ${mib(sent)} once sent, ${mib(growth)} once stored and checked (${mib(archive.length)})`);
      assert.ok(growth < MAX_GROWTH, `the server's RSS grew ${mib(growth)} while receiving ${mib(archive.length)}`);
    } finally {
      rss.stop();
    }
  });
});
