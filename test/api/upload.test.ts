// API tests: archive upload — success, the dockerfile part, size limits, every archive attack leaving the previous upload intact.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { assertError } from '../helpers/api-assert.js';
import { buildMultipart, multipartEnd, newBoundary, partHead, uploadBody, type MultipartBody } from '../helpers/multipart.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';
import { makeTar, makeTarGz, makeZeroBomb, type TarEntrySpec } from '../helpers/tar-fixtures.js';

let counter = 0;
const fresh = (label: string): string => `${label}-${process.pid}-${(counter += 1)}`;

/** A small valid source; its Dockerfile fails at once, so a deploy ends quickly without pulling anything. */
const BASELINE: TarEntrySpec[] = [
  { path: 'app/', type: 'dir' },
  { path: 'app/index.js', content: 'console.log("v1")\n' },
  { path: 'Dockerfile', content: 'FROM scratch\nCOPY does-not-exist /x\n' },
];

/** Everything under a directory: relative path → kind and content digest. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(dir, rel))) {
      const r = path.join(rel, name);
      const st = fs.lstatSync(path.join(dir, r));
      if (st.isDirectory()) {
        out[r] = 'dir';
        walk(r);
      } else if (st.isSymbolicLink()) out[r] = `link:${fs.readlinkSync(path.join(dir, r))}`;
      else out[r] = `file:${crypto.createHash('sha256').update(fs.readFileSync(path.join(dir, r))).digest('hex')}`;
    }
  };
  if (fs.existsSync(dir)) walk('');
  return out;
}

function uploadRow(dataDir: string, id: string): { upload_id: string | null; upload_size: number | null; upload_sha256: string | null } {
  const db = new SQLite(path.join(dataDir, 'slipway.db'), { readonly: true });
  try {
    return db.prepare('SELECT upload_id, upload_size, upload_sha256 FROM deployments WHERE id = ?').get(id) as ReturnType<typeof uploadRow>;
  } finally {
    db.close();
  }
}

function sendUpload(s: TestServer, token: string, id: string, body: MultipartBody): Promise<HttpResult> {
  return s.request('POST', `/api/v1/deployments/${id}/upload`, { token, raw: body.body, headers: { 'content-type': body.contentType } });
}

/** The whole observable state of a deployment's upload: files on disk and the database row. */
function uploadState(s: TestServer, id: string): { files: Record<string, string>; row: ReturnType<typeof uploadRow> } {
  return { files: tree(path.join(s.dataDir, 'uploads', id)), row: uploadRow(s.dataDir, id) };
}

/** Asserts nothing was left in staging and nothing appeared beside the data directory's own entries. */
function assertNoStrayFiles(s: TestServer): void {
  assert.deepEqual(fs.readdirSync(path.join(s.dataDir, 'tmp')), [], 'staging is empty');
}

describe('upload', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  before(async () => {
    s = await startTestServer();
    user = await s.newUser('uploader');
  });
  after(async () => {
    await s.close();
  });

  const createArchive = async (extra: object = {}): Promise<string> => {
    const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'up', subdomain: fresh('up'), source_type: 'archive', ...extra } });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };

  test('deploy with nothing uploaded is 409 invalid_state', async () => {
    const id = await createArchive();
    assertError(await s.request('POST', `/api/v1/deployments/${id}/deploy`, { token: user.token }), 409, 'invalid_state');
    const builds = await s.request('GET', `/api/v1/deployments/${id}/builds`, { token: user.token });
    assert.deepEqual(builds.json, []);
    assert.equal((await s.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json.status, 'pending');
  });

  test('upload answers 200 {status: "uploaded", size} with size the archive length; the source is extracted', async () => {
    const id = await createArchive();
    const archive = makeTarGz(BASELINE);
    const res = await sendUpload(s, user.token, id, uploadBody(archive));
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { status: 'uploaded', size: archive.length });
    const uploads = fs.readdirSync(path.join(s.dataDir, 'uploads', id));
    assert.equal(uploads.length, 1);
    const src = path.join(s.dataDir, 'uploads', id, uploads[0] as string, 'src');
    assert.equal(fs.readFileSync(path.join(src, 'app/index.js'), 'utf8'), 'console.log("v1")\n');
    const row = uploadRow(s.dataDir, id);
    assert.equal(row.upload_size, archive.length);
    assert.equal(row.upload_sha256, crypto.createHash('sha256').update(archive).digest('hex'));
    assertNoStrayFiles(s);

    // A second upload replaces the first, which is removed.
    const v2 = makeTarGz([{ path: 'app/index.js', content: 'console.log("v2")\n' }]);
    const res2 = await sendUpload(s, user.apiKey, id, uploadBody(v2));
    assert.deepEqual(res2.json, { status: 'uploaded', size: v2.length });
    const after = fs.readdirSync(path.join(s.dataDir, 'uploads', id));
    assert.equal(after.length, 1);
    assert.notEqual(after[0], uploads[0]);
    assert.equal(fs.readFileSync(path.join(s.dataDir, 'uploads', id, after[0] as string, 'src/app/index.js'), 'utf8'), 'console.log("v2")\n');
  });

  test('the dockerfile part is written at dockerfile_path inside the source, replacing any file there', async () => {
    const id = await createArchive({ dockerfile_path: 'build/Dockerfile' });
    const archive = makeTarGz([...BASELINE, { path: 'build/', type: 'dir' }, { path: 'build/Dockerfile', content: 'FROM old\n' }]);
    const dockerfile = 'FROM busybox\nCMD ["echo", "hi"]\n';
    const res = await sendUpload(s, user.token, id, uploadBody(archive, dockerfile));
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.size, archive.length, 'size counts the archive only');
    const [upload] = fs.readdirSync(path.join(s.dataDir, 'uploads', id));
    const src = path.join(s.dataDir, 'uploads', id, upload as string, 'src');
    assert.equal(fs.readFileSync(path.join(src, 'build/Dockerfile'), 'utf8'), dockerfile);
    assert.equal(fs.readFileSync(path.join(src, 'Dockerfile'), 'utf8'), 'FROM scratch\nCOPY does-not-exist /x\n', 'other files untouched');

    // Into a directory the archive does not have: it is created.
    const id2 = await createArchive({ dockerfile_path: 'deploy/docker/Dockerfile' });
    const res2 = await sendUpload(s, user.token, id2, uploadBody(makeTarGz(BASELINE), dockerfile));
    assert.equal(res2.status, 200, res2.text);
    const [upload2] = fs.readdirSync(path.join(s.dataDir, 'uploads', id2));
    assert.equal(fs.readFileSync(path.join(s.dataDir, 'uploads', id2, upload2 as string, 'src/deploy/docker/Dockerfile'), 'utf8'), dockerfile);
  });

  test('the dockerfile part never writes through a symlink in the archive', async () => {
    const id = await createArchive();
    const archive = makeTarGz([{ path: 'real.txt', content: 'keep me\n' }, { path: 'Dockerfile', type: 'symlink', linkpath: 'real.txt' }]);
    const res = await sendUpload(s, user.token, id, uploadBody(archive, 'FROM scratch\n'));
    assert.equal(res.status, 200, res.text);
    const [upload] = fs.readdirSync(path.join(s.dataDir, 'uploads', id));
    const src = path.join(s.dataDir, 'uploads', id, upload as string, 'src');
    assert.equal(fs.readFileSync(path.join(src, 'real.txt'), 'utf8'), 'keep me\n');
    assert.ok(!fs.lstatSync(path.join(src, 'Dockerfile')).isSymbolicLink());
    assert.equal(fs.readFileSync(path.join(src, 'Dockerfile'), 'utf8'), 'FROM scratch\n');
  });

  test('every bad archive or body is 400 validation_error and the previous upload stays as it was', async () => {
    const id = await createArchive();
    const baseline = makeTarGz(BASELINE);
    assert.equal((await sendUpload(s, user.token, id, uploadBody(baseline))).status, 200);
    const before = uploadState(s, id);
    const gz = makeTarGz(BASELINE);
    const cases: Array<[string, MultipartBody]> = [
      ['../ traversal', uploadBody(makeTarGz([{ path: '../evil.txt', content: 'x' }]))],
      ['inner ../ traversal', uploadBody(makeTarGz([{ path: 'a/../../evil.txt', content: 'x' }]))],
      ['absolute path', uploadBody(makeTarGz([{ path: '/tmp/slipway-evil.txt', content: 'x' }]))],
      ['symlink out (relative)', uploadBody(makeTarGz([{ path: 'out', type: 'symlink', linkpath: '../../../../etc' }]))],
      ['symlink out (absolute)', uploadBody(makeTarGz([{ path: 'passwd', type: 'symlink', linkpath: '/etc/passwd' }]))],
      ['symlink then write through it', uploadBody(makeTarGz([{ path: 'd', type: 'symlink', linkpath: '..' }, { path: 'd/evil.txt', content: 'x' }]))],
      ['hardlink out (absolute)', uploadBody(makeTarGz([{ path: 'hl', type: 'hardlink', linkpath: '/etc/passwd' }]))],
      ['hardlink out (relative)', uploadBody(makeTarGz([{ path: 'hl', type: 'hardlink', linkpath: '../../slipway.db' }]))],
      ['char device', uploadBody(makeTarGz([{ path: 'null', type: 'char' }]))],
      ['block device', uploadBody(makeTarGz([{ path: 'sda', type: 'block' }]))],
      ['FIFO', uploadBody(makeTarGz([{ path: 'fifo', type: 'fifo' }]))],
      ['not gzip (plain tar)', uploadBody(makeTar(BASELINE))],
      ['not gzip (text)', uploadBody(Buffer.from('hello, this is not an archive\n'))],
      ['gzip of not a tar', uploadBody(gzipSync(Buffer.from('plain text, gzipped, but no tar headers\n'.repeat(50))))],
      ['gzip of a gzip', uploadBody(gzipSync(gz))],
      ['truncated gzip', uploadBody(gz.subarray(0, Math.floor(gz.length / 2)))],
      ['empty archive part', uploadBody(Buffer.alloc(0))],
      ['missing archive part', buildMultipart([{ name: 'dockerfile', content: 'FROM scratch\n' }])],
      ['no parts', buildMultipart([])],
      ['unexpected field part', buildMultipart([{ name: 'archive', filename: 'a.tar.gz', content: baseline }, { name: 'extra', content: 'x' }])],
      ['unexpected file part', buildMultipart([{ name: 'archive', filename: 'a.tar.gz', content: baseline }, { name: 'other', filename: 'o.bin', content: 'x' }])],
      ['unexpected part first', buildMultipart([{ name: 'extra', content: 'x' }, { name: 'archive', filename: 'a.tar.gz', content: baseline }])],
      ['two archive parts', buildMultipart([{ name: 'archive', filename: 'a.tar.gz', content: baseline }, { name: 'archive', filename: 'b.tar.gz', content: baseline }])],
      ['archive sent as a field', buildMultipart([{ name: 'archive', content: 'not a file' }])],
    ];
    for (const [what, body] of cases) {
      const res = await sendUpload(s, user.token, id, body);
      assertError(res, 400, 'validation_error', what);
      assert.deepEqual(uploadState(s, id), before, `${what}: the previous upload changed`);
      assertNoStrayFiles(s);
    }
    assert.ok(!fs.existsSync('/tmp/slipway-evil.txt'));
    assert.ok(!fs.existsSync(path.join(s.dataDir, 'uploads', 'evil.txt')) && !fs.existsSync(path.join(s.dataDir, 'evil.txt')));

    // A deploy still uses the previous upload: the build's commit_sha is that archive's SHA-256.
    const deploy = await s.request('POST', `/api/v1/deployments/${id}/deploy`, { token: user.token });
    assert.equal(deploy.status, 202, deploy.text);
    assert.equal(deploy.json.commit_sha, crypto.createHash('sha256').update(baseline).digest('hex'));
    assert.equal(deploy.json.status, 'building');
    assert.equal(deploy.json.finished_at, null);
    assert.equal((await s.request('DELETE', `/api/v1/deployments/${id}`, { token: user.token })).status, 204);
  });

  test('a git deployment refuses uploads with 400 validation_error', async () => {
    const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'g', subdomain: fresh('git'), repo_url: 'https://example.com/r' } });
    const up = await sendUpload(s, user.token, res.json.id, uploadBody(makeTarGz(BASELINE)));
    assertError(up, 400, 'validation_error');
    assert.deepEqual(uploadState(s, res.json.id), { files: {}, row: { upload_id: null, upload_size: null, upload_sha256: null } });
  });

  test('a body that is not multipart is 415 unsupported_media_type', async () => {
    const id = await createArchive();
    const archive = makeTarGz(BASELINE);
    for (const [contentType, raw] of [
      ['application/gzip', archive],
      ['application/octet-stream', archive],
      ['application/json', Buffer.from('{"archive":"x"}')],
      ['text/plain', Buffer.from('hello')],
    ] as const) {
      const res = await s.request('POST', `/api/v1/deployments/${id}/upload`, { token: user.token, raw, headers: { 'content-type': contentType } });
      assertError(res, 415, 'unsupported_media_type', contentType);
    }
    assert.deepEqual(uploadState(s, id).files, {});
  });

  test("another user's deployment is 404 and its upload is untouched", async () => {
    const id = await createArchive();
    assert.equal((await sendUpload(s, user.token, id, uploadBody(makeTarGz(BASELINE)))).status, 200);
    const before = uploadState(s, id);
    const other = await s.newUser('intruder');
    for (const token of [other.token, other.apiKey]) {
      assertError(await sendUpload(s, token, id, uploadBody(makeTarGz([{ path: 'pwned', content: 'x' }]))), 404, 'not_found');
    }
    assert.deepEqual(uploadState(s, id), before);
  });

  test('uploads need credentials', async () => {
    const id = await createArchive();
    const body = uploadBody(makeTarGz(BASELINE));
    const res = await s.request('POST', `/api/v1/deployments/${id}/upload`, { raw: body.body, headers: { 'content-type': body.contentType } });
    assertError(res, 401, 'unauthorized');
    assert.deepEqual(uploadState(s, id).files, {});
  });
});

describe('upload limits', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  const MAX_UPLOAD = 16 * 1024;
  before(async () => {
    s = await startTestServer({ SLIPWAY_MAX_UPLOAD_BYTES: String(MAX_UPLOAD), SLIPWAY_MAX_EXPANDED_BYTES: '65536', SLIPWAY_MAX_ARCHIVE_ENTRIES: '20' });
    user = await s.newUser('limits');
  });
  after(async () => {
    await s.close();
  });

  test('over the size, expanded-size and entry limits: refused, previous upload intact', async () => {
    const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'l', subdomain: fresh('lim'), source_type: 'archive' } });
    const id = res.json.id as string;
    const baseline = makeTarGz(BASELINE);
    assert.equal((await sendUpload(s, user.token, id, uploadBody(baseline))).status, 200);
    const before = uploadState(s, id);

    // Random bytes do not compress: just over the limit, and far over it (refused from Content-Length).
    const justOver = makeTarGz([{ path: 'noise.bin', content: crypto.randomBytes(MAX_UPLOAD) }]);
    assert.ok(justOver.length > MAX_UPLOAD && justOver.length < MAX_UPLOAD + 2048);
    assertError(await sendUpload(s, user.token, id, uploadBody(justOver)), 413, 'payload_too_large', 'just over');
    assert.deepEqual(uploadState(s, id), before);
    const farOver = makeTarGz([{ path: 'noise.bin', content: crypto.randomBytes(3 * 1024 * 1024) }]);
    assertError(await sendUpload(s, user.token, id, uploadBody(farOver)), 413, 'payload_too_large', 'far over');
    assert.deepEqual(uploadState(s, id), before);

    // Just under the limit is accepted (checked last, once the refusals are done).
    const exact = makeTarGz([{ path: 'noise.bin', content: crypto.randomBytes(MAX_UPLOAD - 2000) }]);
    assert.ok(exact.length <= MAX_UPLOAD);

    const bomb = makeTarGz([{ path: 'zeros.bin', content: Buffer.alloc(4 * 1024 * 1024) }]);
    assert.ok(bomb.length < MAX_UPLOAD, 'the bomb is small compressed');
    assertError(await sendUpload(s, user.token, id, uploadBody(bomb)), 400, 'validation_error', 'expanded size');
    assert.deepEqual(uploadState(s, id), before);

    const lying = makeTarGz([{ path: 'small.bin', content: 'x', size: 10 * 1024 * 1024 }]);
    assertError(await sendUpload(s, user.token, id, uploadBody(lying)), 400, 'validation_error', 'declared size');
    assert.deepEqual(uploadState(s, id), before);

    const many = makeTarGz(Array.from({ length: 50 }, (_, i) => ({ path: `f${i}.txt`, content: 'x' })));
    assertError(await sendUpload(s, user.token, id, uploadBody(many)), 400, 'validation_error', 'entry count');
    assert.deepEqual(uploadState(s, id), before);
    assertNoStrayFiles(s);

    const ok = await sendUpload(s, user.token, id, uploadBody(exact));
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.size, exact.length);
  });

  test('a JSON body over 1 MiB is 413 payload_too_large', async () => {
    const res = await s.request('POST', '/api/v1/deployments', {
      token: user.token,
      body: { name: 'x'.repeat(1024 * 1024 + 10), subdomain: fresh('big'), source_type: 'archive' },
    });
    assertError(res, 413, 'payload_too_large');
    assert.deepEqual((await s.request('GET', '/api/v1/deployments', { token: user.token })).json.length, 1);
  });
});

/** Waits until `check` holds, polling; fails after `timeoutMs`. */
async function waitUntil(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await sleep(25);
  }
}

const stagingEntries = (s: TestServer): string[] => fs.readdirSync(path.join(s.dataDir, 'tmp'));

/** An upload request written by hand on a socket: its head, with the Content-Length the caller declares. */
function openUpload(s: TestServer, token: string, id: string, boundary: string, contentLength: number): net.Socket {
  const socket = net.connect(s.port, '127.0.0.1');
  socket.write(
    `POST /api/v1/deployments/${id}/upload HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${contentLength}\r\n\r\n`,
  );
  return socket;
}

/** Reads the answer on `socket` until the server has sent a whole JSON body or closed; fails after a timeout. */
async function readAnswer(socket: net.Socket, timeoutMs = 30_000): Promise<{ status: number; json: { error?: string; message?: string } } | 'closed'> {
  let text = '';
  socket.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer and no close within ${timeoutMs} ms (got ${JSON.stringify(text.slice(0, 200))})`));
    }, timeoutMs);
    const settle = (value: Awaited<ReturnType<typeof readAnswer>>): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(value);
    };
    const parse = (): void => {
      const split = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(text)?.[1];
      if (split < 0 || length === undefined || Buffer.byteLength(text.slice(split + 4)) < Number(length)) return;
      settle({ status: Number(text.slice(9, 12)), json: JSON.parse(text.slice(split + 4)) });
    };
    socket.on('data', (chunk: string) => {
      text += chunk;
      parse();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => settle('closed'));
  });
}

describe('upload bodies that end badly', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  before(async () => {
    s = await startTestServer();
    user = await s.newUser('ends');
  });
  after(async () => {
    await s.close();
  });

  /** An archive deployment with a first upload in place, and the state that must survive. */
  const withBaseline = async (): Promise<{ id: string; before: ReturnType<typeof uploadState> }> => {
    const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'e', subdomain: fresh('end'), source_type: 'archive' } });
    assert.equal(res.status, 201, res.text);
    const id = res.json.id as string;
    assert.equal((await sendUpload(s, user.token, id, uploadBody(makeTarGz(BASELINE)))).status, 200);
    return { id, before: uploadState(s, id) };
  };

  test('the audit\'s shape (archive, dockerfile as a file, a text part over 1 MiB, no closing boundary) is answered 400 and leaves nothing staged', async () => {
    const { id, before } = await withBaseline();
    const boundary = newBoundary();
    const body = Buffer.concat([
      Buffer.from(partHead(boundary, { name: 'archive', filename: 'a.tar.gz' })),
      makeTarGz([{ path: 'Dockerfile', content: 'FROM scratch\n' }, { path: 'pwned', content: 'x' }]),
      Buffer.from(`\r\n${partHead(boundary, { name: 'dockerfile', filename: 'Dockerfile', contentType: 'text/plain' })}FROM scratch\n`),
      Buffer.from(`\r\n${partHead(boundary, { name: 'note' })}`),
      Buffer.alloc(1024 * 1024 + 100, 'a'),
    ]);
    // Repeated: the old parser's outcome depended on which of its events won a race.
    for (let i = 0; i < 5; i++) {
      const socket = openUpload(s, user.token, id, boundary, body.length);
      socket.write(body);
      const answer = await readAnswer(socket);
      assert.notEqual(answer, 'closed');
      if (answer === 'closed') return;
      assert.equal(answer.status, 400, JSON.stringify(answer.json));
      assert.equal(answer.json.error, 'validation_error');
      await waitUntil('staging is empty', () => stagingEntries(s).length === 0);
      assert.deepEqual(uploadState(s, id), before);
    }
  });

  test('a text part over 1 MiB is 400 validation_error, and so is a body without its closing boundary', async () => {
    const { id, before } = await withBaseline();
    const archive = makeTarGz(BASELINE);
    const longField = buildMultipart([
      { name: 'archive', filename: 'a.tar.gz', content: archive },
      { name: 'dockerfile', content: 'x'.repeat(1024 * 1024 + 1) },
    ]);
    const res = await sendUpload(s, user.token, id, longField);
    assertError(res, 400, 'validation_error', 'long field');
    assert.match(res.json.message, /larger than the limit of a text part/);
    assert.deepEqual(uploadState(s, id), before);

    const whole = uploadBody(archive);
    const boundary = whole.contentType.split('boundary=')[1] as string;
    const cut = { ...whole, body: whole.body.subarray(0, whole.body.length - multipartEnd(boundary).length) };
    assert.ok(!cut.body.includes(`--${boundary}--`), 'the closing boundary is gone');
    const noEnd = await sendUpload(s, user.token, id, cut);
    assertError(noEnd, 400, 'validation_error', 'no closing boundary');
    assert.match(noEnd.json.message, /closing boundary/);
    assert.deepEqual(uploadState(s, id), before);
    assertNoStrayFiles(s);
  });

  test('a dockerfile sent as a file part is taken as the Dockerfile text, up to 1 MiB', async () => {
    const { id, before } = await withBaseline();
    const archive = makeTarGz(BASELINE);
    const dockerfile = 'FROM scratch\nCOPY app /app\n';
    const ok = await sendUpload(
      s,
      user.token,
      id,
      buildMultipart([
        { name: 'archive', filename: 'a.tar.gz', content: archive },
        { name: 'dockerfile', filename: 'Dockerfile', contentType: 'text/plain', content: dockerfile },
      ]),
    );
    assert.equal(ok.status, 200, ok.text);
    const [upload] = fs.readdirSync(path.join(s.dataDir, 'uploads', id));
    assert.equal(fs.readFileSync(path.join(s.dataDir, 'uploads', id, upload as string, 'src', 'Dockerfile'), 'utf8'), dockerfile);
    const accepted = uploadState(s, id);
    assert.notDeepEqual(accepted, before);

    const tooBig = await sendUpload(
      s,
      user.token,
      id,
      buildMultipart([
        { name: 'archive', filename: 'a.tar.gz', content: archive },
        { name: 'dockerfile', filename: 'Dockerfile', contentType: 'text/plain', content: 'x'.repeat(1024 * 1024 + 1) },
      ]),
    );
    assertError(tooBig, 400, 'validation_error', 'dockerfile file over 1 MiB');
    assert.deepEqual(uploadState(s, id), accepted);
    assertNoStrayFiles(s);
  });

  test('a client that goes away mid-body (inside the archive, or after it) leaves nothing staged and the previous upload intact', async () => {
    const { id, before } = await withBaseline();
    const boundary = newBoundary();
    const archiveHead = Buffer.from(partHead(boundary, { name: 'archive', filename: 'a.tar.gz' }));
    // Incompressible, so the staged archive grows as the bytes arrive.
    const noise = makeTarGz([{ path: 'noise.bin', content: crypto.randomBytes(256 * 1024) }]);
    const cuts: Array<[string, Buffer]> = [
      ['inside the archive part', Buffer.concat([archiveHead, noise.subarray(0, 128 * 1024)])],
      ['after the archive, inside the dockerfile file part', Buffer.concat([archiveHead, noise, Buffer.from(`\r\n${partHead(boundary, { name: 'dockerfile', filename: 'D' })}FROM`)])],
      [
        'inside a text part over 1 MiB, after a dockerfile file part',
        Buffer.concat([
          archiveHead,
          noise,
          Buffer.from(`\r\n${partHead(boundary, { name: 'dockerfile', filename: 'D' })}FROM scratch\n\r\n${partHead(boundary, { name: 'note' })}`),
          Buffer.alloc(1024 * 1024 + 100, 'a'),
        ]),
      ],
    ];
    for (const [where, sent] of cuts) {
      // The declared length promises far more than is sent, as a stalled or dying client would.
      const socket = openUpload(s, user.token, id, boundary, sent.length + 10 * 1024 * 1024);
      socket.on('error', () => undefined);
      socket.write(sent);
      await waitUntil(`${where}: the archive is being staged`, () =>
        stagingEntries(s).some((entry) => {
          const file = path.join(s.dataDir, 'tmp', entry, 'archive.tar.gz');
          return fs.existsSync(file) && fs.statSync(file).size > 0;
        }),
      );
      socket.destroy();
      await waitUntil(`${where}: staging is empty after the client left`, () => stagingEntries(s).length === 0);
      assert.deepEqual(uploadState(s, id), before, where);
    }
    // The server still takes uploads.
    assert.equal((await sendUpload(s, user.token, id, uploadBody(makeTarGz(BASELINE)))).status, 200);
  });
});

describe('upload: a gzip bomb', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  before(async () => {
    // A lower limit than the default 2 GiB only so the header pass has less to decompress.
    s = await startTestServer({ SLIPWAY_MAX_EXPANDED_BYTES: String(128 * 1024 * 1024) });
    user = await s.newUser('bomb');
  });
  after(async () => {
    await s.close();
  });

  test('the audit\'s 2.2 MB bomb is 400 validation_error from the declared sizes, with nothing extracted, and the previous upload intact', async () => {
    const created = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'b', subdomain: fresh('bomb'), source_type: 'archive' } });
    const id = created.json.id as string;
    assert.equal((await sendUpload(s, user.token, id, uploadBody(makeTarGz(BASELINE)))).status, 200);
    const before = uploadState(s, id);
    const bomb = makeZeroBomb(34, 64 * 1024 * 1024);
    assert.ok(bomb.length < 2.5 * 1024 * 1024, `the fixture is small (${bomb.length} bytes)`);

    // Staging holds the received archive; anything beyond it would be extracted files.
    let peak = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        peak = Math.max(peak, stagedBytes(path.join(s.dataDir, 'tmp')));
        await sleep(5);
      }
    })();
    let res: HttpResult;
    try {
      res = await sendUpload(s, user.token, id, uploadBody(bomb));
    } finally {
      watching = false;
      await watcher;
    }
    assertError(res, 400, 'validation_error', 'bomb');
    assert.match(res.json.message, /archive expands to more than 134217728 bytes/);
    assert.ok(peak <= bomb.length + 1024 * 1024, `staged ${peak} bytes for a ${bomb.length}-byte archive`);
    assert.deepEqual(uploadState(s, id), before);
    assertNoStrayFiles(s);
  });
});

/** Bytes in the files under `dir`; entries vanishing while counted are skipped. */
function stagedBytes(dir: string): number {
  let total = 0;
  for (const name of fs.readdirSync(dir, { recursive: true }) as string[]) {
    try {
      const st = fs.lstatSync(path.join(dir, name));
      if (st.isFile()) total += st.size;
    } catch {
      // removed meanwhile
    }
  }
  return total;
}
