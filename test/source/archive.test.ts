// Tests for source archive extraction: good archives land intact, every kind of malicious archive is refused cleanly.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import * as tar from 'tar';
import { DomainError } from '../../src/core/errors.js';
import { extractArchive, writeFileInside } from '../../src/source/archive.js';
import type { ArchiveLimits } from '../../src/source/archive.js';
import { globalPaxEntry, makeTar, makeTarGz, makeZeroBomb, writeTarGz } from '../helpers/tar-fixtures.js';
import type { TarEntrySpec } from '../helpers/tar-fixtures.js';

const LIMITS: ArchiveLimits = { maxExpandedBytes: 64 * 1024 * 1024, maxEntries: 1000 };
const SENTINEL = 'untouched';
const sandboxes: string[] = [];

after(async () => {
  await Promise.all(sandboxes.map((dir) => fs.rm(dir, { recursive: true, force: true })));
});

interface Sandbox {
  readonly dir: string;
  readonly archive: string;
  readonly dest: string;
  readonly outside: string;
}

/** A temp dir holding the archive, the (not yet existing) destination and an `outside` dir with a sentinel file. */
async function sandbox(): Promise<Sandbox> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-archive-'));
  sandboxes.push(dir);
  const outside = path.join(dir, 'outside');
  await fs.mkdir(outside);
  await fs.writeFile(path.join(outside, 'sentinel.txt'), SENTINEL);
  return { dir, archive: path.join(dir, 'archive.tar.gz'), dest: path.join(dir, 'dest'), outside };
}

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    () => true,
    () => false,
  );
}

/** Asserts the sandbox holds exactly what it held before extraction: no destination, nothing new outside. */
async function assertUntouched(box: Sandbox): Promise<void> {
  assert.equal(await exists(box.dest), false, 'destination must be removed');
  assert.deepEqual((await fs.readdir(box.dir)).sort(), ['archive.tar.gz', 'outside']);
  assert.deepEqual(await fs.readdir(box.outside), ['sentinel.txt']);
  assert.equal(await fs.readFile(path.join(box.outside, 'sentinel.txt'), 'utf8'), SENTINEL);
}

/** Extracts `archive` (entries or raw bytes) and asserts a validation_error matching `message`, with nothing left behind. */
async function assertRejected(
  archive: readonly TarEntrySpec[] | Buffer | ((box: Sandbox) => readonly TarEntrySpec[]),
  message: RegExp,
  limits: ArchiveLimits = LIMITS,
): Promise<Sandbox> {
  const box = await sandbox();
  const bytes = Buffer.isBuffer(archive) ? archive : makeTarGz(typeof archive === 'function' ? archive(box) : archive);
  await fs.writeFile(box.archive, bytes);
  await assert.rejects(extractArchive(box.archive, box.dest, limits), (err: unknown) => {
    assert.ok(err instanceof DomainError, `expected a DomainError, got ${String(err)}`);
    assert.equal(err.code, 'validation_error');
    assert.match(err.message, message);
    return true;
  });
  await assertUntouched(box);
  return box;
}

describe('extractArchive: good archives', () => {
  it('extracts files, directories, modes, symlinks and hard links exactly', async () => {
    const box = await sandbox();
    const big = randomBytes(300 * 1024); // spans many parser chunks
    const longPath = `./src/${'deep/'.repeat(25)}long-name.txt`; // > 100 bytes: carried by a pax header
    await writeTarGz(box.archive, [
      globalPaxEntry({ comment: 'made by git archive' }),
      { path: './', type: 'dir', mode: 0o755 },
      { path: './src/', type: 'dir', mode: 0o750 },
      { path: './src/index.js', content: 'console.log("hi");\n', mode: 0o644 },
      { path: './src/empty.txt', content: '', mode: 0o600 },
      { path: './src/big.bin', content: big },
      { path: './bin/run.sh', content: '#!/bin/sh\necho run\n', mode: 0o755 }, // parent dir implied
      { path: './bin/setuid', content: 'x', mode: 0o4755 },
      { path: longPath, content: 'long' },
      { path: './docs', type: 'symlink', linkpath: 'src' },
      { path: './src/self', type: 'symlink', linkpath: '.' },
      { path: './src/run-link', type: 'symlink', linkpath: '../bin/run.sh' },
      { path: './bin/run-again.sh', type: 'hardlink', linkpath: './bin/run.sh' },
      { path: 'dangling', type: 'symlink', linkpath: 'not/there' },
    ]);

    const result = await extractArchive(box.archive, box.dest, LIMITS);

    const fileBytes = ['console.log("hi");\n', '', '#!/bin/sh\necho run\n', 'x', 'long'].reduce((n, s) => n + Buffer.byteLength(s), 0);
    assert.deepEqual(result, { entries: 13, expandedBytes: fileBytes + big.length });
    const at = (p: string): string => path.join(box.dest, p);
    assert.equal(await fs.readFile(at('src/index.js'), 'utf8'), 'console.log("hi");\n');
    assert.equal(await fs.readFile(at('src/empty.txt'), 'utf8'), '');
    assert.ok((await fs.readFile(at('src/big.bin'))).equals(big));
    assert.equal(await fs.readFile(at(longPath), 'utf8'), 'long');
    assert.equal((await fs.stat(at('src/index.js'))).mode & 0o7777, 0o644);
    assert.equal((await fs.stat(at('src/empty.txt'))).mode & 0o7777, 0o600);
    assert.equal((await fs.stat(at('bin/run.sh'))).mode & 0o7777, 0o755);
    assert.equal((await fs.stat(at('bin/setuid'))).mode & 0o7777, 0o755, 'setuid bit dropped');
    assert.equal((await fs.stat(at('src'))).mode & 0o7777, 0o750);
    assert.ok((await fs.stat(at('bin'))).isDirectory());
    assert.equal(await fs.readlink(at('docs')), 'src');
    assert.equal(await fs.readFile(at('docs/index.js'), 'utf8'), 'console.log("hi");\n');
    assert.equal(await fs.readlink(at('src/self')), '.');
    assert.equal(await fs.readFile(at('src/run-link'), 'utf8'), '#!/bin/sh\necho run\n');
    assert.equal(await fs.readlink(at('dangling')), 'not/there');
    const [original, linked] = await Promise.all([fs.stat(at('bin/run.sh')), fs.stat(at('bin/run-again.sh'))]);
    assert.equal(linked.ino, original.ino, 'hard link shares the inode');
    assert.equal(original.nlink, 2);
    assert.deepEqual((await fs.readdir(box.dir)).sort(), ['archive.tar.gz', 'dest', 'outside']);
    assert.deepEqual((await fs.readdir(box.dest)).sort(), ['bin', 'dangling', 'docs', 'src']);
  });

  it('extracts an archive made by a real packer (node-tar, gzip)', async () => {
    const box = await sandbox();
    const src = path.join(box.dir, 'src-tree');
    await fs.mkdir(path.join(src, 'app', 'lib'), { recursive: true });
    await fs.writeFile(path.join(src, 'Dockerfile'), 'FROM scratch\n');
    await fs.writeFile(path.join(src, 'app', 'lib', 'x.js'), 'export {};\n');
    await fs.symlink('lib/x.js', path.join(src, 'app', 'x.js'));
    await tar.c({ gzip: true, file: box.archive, cwd: src, portable: true }, ['.']);
    await fs.rm(src, { recursive: true });

    const result = await extractArchive(box.archive, box.dest, LIMITS);

    assert.equal(result.expandedBytes, 'FROM scratch\n'.length + 'export {};\n'.length);
    assert.equal(await fs.readFile(path.join(box.dest, 'Dockerfile'), 'utf8'), 'FROM scratch\n');
    assert.equal(await fs.readFile(path.join(box.dest, 'app', 'x.js'), 'utf8'), 'export {};\n');
    assert.equal(await fs.readlink(path.join(box.dest, 'app', 'x.js')), 'lib/x.js');
  });

  it('lets a later file entry replace an earlier one with the same path, as tar does', async () => {
    const box = await sandbox();
    await writeTarGz(box.archive, [
      { path: 'a.txt', content: 'first' },
      { path: 'keep.txt', type: 'hardlink', linkpath: 'a.txt' },
      { path: './a.txt', content: 'second' },
    ]);
    await extractArchive(box.archive, box.dest, LIMITS);
    assert.equal(await fs.readFile(path.join(box.dest, 'a.txt'), 'utf8'), 'second');
    assert.equal(await fs.readFile(path.join(box.dest, 'keep.txt'), 'utf8'), 'first');
  });

  it('ignores zero padding after the end-of-archive marker', async () => {
    const box = await sandbox();
    const body = makeTar([{ path: 'a.txt', content: 'a' }]);
    await fs.writeFile(box.archive, gzipSync(Buffer.concat([body, Buffer.alloc(10240)])));
    assert.deepEqual(await extractArchive(box.archive, box.dest, LIMITS), { entries: 1, expandedBytes: 1 });
  });
});

describe('extractArchive: rejected archives', () => {
  it('rejects ../ traversal', async () => {
    await assertRejected([{ path: '../outside/pwned.txt', content: 'x' }], /"\.\.\/outside\/pwned\.txt" contains a "\.\." segment/);
    await assertRejected([{ path: 'a/../../outside/pwned.txt', content: 'x' }], /contains a "\.\." segment/);
    await assertRejected([{ path: '..\\outside\\pwned.txt', content: 'x' }], /contains a "\.\." segment/);
    // The path a pax header or a GNU long-name header substitutes is the one checked.
    await assertRejected([{ path: 'safe.txt', content: 'x', pax: { path: '../outside/pwned.txt' } }], /"\.\.\/outside\/pwned\.txt" contains a "\.\." segment/);
    await assertRejected(
      [
        { path: '././@LongLink', typeflag: 'L', content: '../outside/pwned.txt\0' },
        { path: 'safe.txt', content: 'x' },
      ],
      /"\.\.\/outside\/pwned\.txt" contains a "\.\." segment/,
    );
  });

  it('rejects absolute paths, POSIX and Windows forms', async () => {
    await assertRejected((box) => [{ path: path.join(box.outside, 'pwned.txt'), content: 'x' }], /is an absolute path/);
    await assertRejected([{ path: 'C:\\outside\\pwned.txt', content: 'x' }], /is an absolute path/);
    await assertRejected([{ path: 'c:pwned.txt', content: 'x' }], /is an absolute path/);
    await assertRejected([{ path: '\\\\server\\share\\pwned.txt', content: 'x' }], /is an absolute path/);
  });

  it('rejects a symlink to /etc, and never writes through it', async () => {
    const name = `slipway-pwned-${randomBytes(6).toString('hex')}`;
    await assertRejected(
      [
        { path: 'link', type: 'symlink', linkpath: '/etc' },
        { path: `link/${name}`, content: 'x' },
      ],
      /"link" is a symlink to an absolute path \("\/etc"\)/,
    );
    assert.equal(await exists(path.join('/etc', name)), false);
  });

  it('rejects a symlink to an absolute path into the sandbox followed by a file under it', async () => {
    await assertRejected(
      (box) => [
        { path: 'link', type: 'symlink', linkpath: box.outside },
        { path: 'link/pwned.txt', content: 'x' },
      ],
      /symlink to an absolute path/,
    );
  });

  it('rejects a relative symlink climbing out of the tree', async () => {
    await assertRejected(
      [
        { path: 'sub/', type: 'dir' },
        { path: 'sub/link', type: 'symlink', linkpath: '../../outside' },
      ],
      /"sub\/link" is a symlink to "\.\.\/\.\.\/outside", which points outside the archive/,
    );
    await assertRejected([{ path: 'a/b/link', type: 'symlink', linkpath: '../x/../../../outside' }], /points outside the archive/);
  });

  it('rejects a symlink that escapes through another symlink (lexically inside, really outside)', async () => {
    // self -> . is harmless, but self/.. is the parent of the root once the kernel follows self.
    await assertRejected(
      [
        { path: 'self', type: 'symlink', linkpath: '.' },
        { path: 'escape', type: 'symlink', linkpath: 'self/../outside' },
      ],
      /"escape" is a symlink to "self\/\.\.\/outside", which points outside the archive/,
    );
    // The same, with the helper link arriving after the link that uses it.
    await assertRejected(
      [
        { path: 'escape', type: 'symlink', linkpath: 'here/..' },
        { path: 'here', type: 'symlink', linkpath: '.' },
      ],
      /"escape" is a symlink to "here\/\.\.", which points outside the archive/,
    );
  });

  it('rejects a symlink loop', async () => {
    await assertRejected(
      [
        { path: 'a', type: 'symlink', linkpath: 'b/..' },
        { path: 'b', type: 'symlink', linkpath: 'a/x' },
      ],
      /symlink loop/,
    );
  });

  it('rejects an entry written through an earlier (valid) symlink', async () => {
    await assertRejected(
      [
        { path: 'sub/', type: 'dir' },
        { path: 'link', type: 'symlink', linkpath: 'sub' },
        { path: 'link/file.txt', content: 'x' },
      ],
      /"link\/file\.txt" goes through the symlink "link"/,
    );
  });

  it('rejects a symlink replaced by a directory (CVE-2021-32803 shape)', async () => {
    await assertRejected(
      [
        { path: 'sub/', type: 'dir' },
        { path: 'd', type: 'symlink', linkpath: 'sub' },
        { path: 'd/', type: 'dir' },
        { path: 'd/x.txt', content: 'x' },
      ],
      /"d\/" is a directory but an earlier entry put a symlink there/,
    );
  });

  it('rejects other path collisions: file under a file, file over a directory, symlink over a file', async () => {
    await assertRejected(
      [
        { path: 'f', content: 'x' },
        { path: 'f/x', content: 'x' },
      ],
      /"f\/x" goes through "f", which is a file/,
    );
    await assertRejected(
      [
        { path: 'd/', type: 'dir' },
        { path: 'd', content: 'x' },
      ],
      /"d" is a file but an earlier entry put a dir there/,
    );
    await assertRejected(
      [
        { path: 'f', content: 'x' },
        { path: 'f', type: 'symlink', linkpath: 'g' },
      ],
      /"f" is a symlink but an earlier entry put a file there/,
    );
  });

  it('rejects a hard link to /etc/passwd without linking it', async () => {
    const before = await fs.stat('/etc/passwd');
    await assertRejected([{ path: 'passwd', type: 'hardlink', linkpath: '/etc/passwd' }], /target "\/etc\/passwd" is an absolute path/);
    assert.equal((await fs.stat('/etc/passwd')).nlink, before.nlink);
  });

  it('rejects a hard link whose target contains ..', async () => {
    await assertRejected([{ path: 'x', type: 'hardlink', linkpath: '../outside/sentinel.txt' }], /target "\.\.\/outside\/sentinel\.txt" contains a "\.\." segment/);
  });

  it('rejects a hard link to anything but an earlier regular file', async () => {
    await assertRejected(
      [
        { path: 'h', type: 'hardlink', linkpath: 'later.txt' },
        { path: 'later.txt', content: 'x' },
      ],
      /"h" is a hard link to "later\.txt", which is not an earlier regular file/,
    );
    await assertRejected(
      [
        { path: 'sub/', type: 'dir' },
        { path: 's', type: 'symlink', linkpath: 'sub' },
        { path: 'h', type: 'hardlink', linkpath: 's' },
      ],
      /not an earlier regular file/,
    );
    await assertRejected(
      [
        { path: 'sub/f', content: 'x' },
        { path: 's', type: 'symlink', linkpath: 'sub' },
        { path: 'h', type: 'hardlink', linkpath: 's/f' },
      ],
      /not an earlier regular file/,
    );
    await assertRejected([{ path: 'd/', type: 'dir' }, { path: 'h', type: 'hardlink', linkpath: 'd' }], /not an earlier regular file/);
  });

  it('rejects device, FIFO, contiguous and unknown entry types', async () => {
    await assertRejected([{ path: 'dev', type: 'char' }], /"dev" has an unsupported type \(CharacterDevice\)/);
    await assertRejected([{ path: 'blk', type: 'block' }], /"blk" has an unsupported type \(BlockDevice\)/);
    await assertRejected([{ path: 'fifo', type: 'fifo' }], /"fifo" has an unsupported type \(FIFO\)/);
    await assertRejected([{ path: 'c', type: 'contiguous', content: 'x' }], /"c" has an unsupported type \(ContiguousFile\)/);
    await assertRejected([{ path: 'sparse', typeflag: 'S', content: 'x' }], /"sparse" has an unsupported type/);
    await assertRejected([{ path: 'odd', typeflag: 'Z', content: 'x' }], /"odd" has an unsupported type/);
  });

  it('rejects a header that claims more than the expanded-size limit, before writing it', async () => {
    await assertRejected([{ path: 'huge.bin', content: 'tiny', size: 1024 ** 3 }], /archive expands to more than 1048576 bytes \(at archive entry "huge\.bin"/, {
      maxExpandedBytes: 1024 * 1024,
      maxEntries: 10,
    });
  });

  it('refuses a 2.2 MB bomb of many large zero files from the declared sizes, having written nothing', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-bomb-'));
    sandboxes.push(dir);
    const archive = path.join(dir, 'bomb.tar.gz');
    const bomb = makeZeroBomb(34, 64 * 1024 * 1024);
    assert.ok(bomb.length < 2.5 * 1024 * 1024, `the fixture really is a bomb (${bomb.length} bytes)`);
    await fs.writeFile(archive, bomb);
    const dest = path.join(dir, 'out');
    // Each file is under the limit; their declared sum passes it at the third header.
    let peak = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        peak = Math.max(peak, await treeBytes(dest));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    try {
      await assert.rejects(extractArchive(archive, dest, { maxExpandedBytes: 128 * 1024 * 1024, maxEntries: 1000 }), (err: unknown) => {
        assert.ok(err instanceof DomainError && err.code === 'validation_error', String(err));
        assert.match(err.message, /archive expands to more than 134217728 bytes \(at archive entry "zeros-2\.bin"/);
        return true;
      });
    } finally {
      watching = false;
      await watcher;
    }
    assert.ok(peak < 1024 * 1024, `bytes written before the refusal: ${peak}`);
    await assert.rejects(fs.stat(dest), { code: 'ENOENT' });
  });

  it('rejects a highly compressible bomb over the expanded-size limit', async () => {
    const box = await assertRejected([{ path: 'zeros.bin', content: Buffer.alloc(8 * 1024 * 1024) }], /archive expands to more than/, {
      maxExpandedBytes: 1024 * 1024,
      maxEntries: 10,
    });
    assert.ok((await fs.stat(box.archive)).size < 64 * 1024, 'the fixture really is a bomb');
    await assertRejected(
      [
        { path: 'a', content: Buffer.alloc(400 * 1024) },
        { path: 'b', content: Buffer.alloc(400 * 1024) },
        { path: 'c', content: Buffer.alloc(400 * 1024) },
      ],
      /archive expands to more than 1048576 bytes \(at archive entry "c"/,
      { maxExpandedBytes: 1024 * 1024, maxEntries: 10 },
    );
  });

  it('rejects more entries than allowed, and more implied directories than allowed', async () => {
    const files = Array.from({ length: 4 }, (_, i) => ({ path: `f${i}.txt`, content: 'x' }));
    await assertRejected(files, /archive has more than 3 entries/, { maxExpandedBytes: 1024, maxEntries: 3 });
    await assertRejected([{ path: 'a/b/c/d/e.txt', content: 'x' }], /archive paths imply more than 3 directories/, {
      maxExpandedBytes: 1024,
      maxEntries: 3,
    });
  });

  it('rejects a pax header larger than 1 MiB instead of skipping it', async () => {
    await assertRejected([{ path: 'a.txt', content: 'x', pax: { comment: 'c'.repeat(1100 * 1024) } }], /extended header larger than/);
  });

  it('rejects files that are not gzip-compressed tars', async () => {
    await assertRejected(Buffer.from('just some text, not an archive\n'), /not gzip-compressed/);
    await assertRejected(makeTar([{ path: 'a.txt', content: 'x' }]), /not gzip-compressed/);
    await assertRejected(Buffer.alloc(0), /archive is empty \(0 bytes\)/);
    await assertRejected(gzipSync(Buffer.from('hello')), /archive is not a tar archive/);
    await assertRejected(gzipSync(Buffer.from('x'.repeat(4096))), /not a valid tar archive: .*checksum/);
    await assertRejected(gzipSync(makeTarGz([{ path: 'a.txt', content: 'x' }])), /holds another gzip stream/);
  });

  it('rejects corrupt or truncated gzip', async () => {
    const whole = makeTarGz([{ path: 'a.txt', content: randomBytes(20_000) }]);
    await assertRejected(whole.subarray(0, Math.floor(whole.length / 2)), /not a valid gzip stream/);
    const corrupt = Buffer.from(whole);
    corrupt.writeUInt32LE(~corrupt.readUInt32LE(corrupt.length - 8) >>> 0, corrupt.length - 8); // flip the CRC32
    await assertRejected(corrupt, /not a valid gzip stream/);
  });

  it('rejects a truncated tar inside valid gzip and a header with a bad checksum', async () => {
    const tarBytes = makeTar([{ path: 'a.txt', content: 'x'.repeat(5000) }], { end: false });
    await assertRejected(gzipSync(tarBytes.subarray(0, 2048)), /Truncated input/);
    const bad = makeTar([{ path: 'a.txt', content: 'x' }]);
    bad[0] = 'b'.charCodeAt(0); // changes the name without fixing the checksum
    await assertRejected(gzipSync(bad), /checksum/);
  });

  it('rejects an archive with no entries', async () => {
    await assertRejected(makeTarGz([]), /^archive is empty$/);
  });
});

describe('extractArchive: other behaviour', () => {
  it('rejects with the abort reason when the signal is aborted, leaving no destination', async () => {
    const box = await sandbox();
    await writeTarGz(box.archive, [{ path: 'a.txt', content: 'x' }]);
    const reason = new Error('build cancelled');
    await assert.rejects(extractArchive(box.archive, box.dest, LIMITS, AbortSignal.abort(reason)), (err) => err === reason);
    await assertUntouched(box);
  });

  it('stops when aborted while extracting, removing the destination', async () => {
    const box = await sandbox();
    const files = Array.from({ length: 200 }, (_, i) => ({ path: `f${i}.bin`, content: randomBytes(64 * 1024) }));
    await writeTarGz(box.archive, files);
    const controller = new AbortController();
    const reason = new Error('deleted');
    const running = extractArchive(box.archive, box.dest, LIMITS, controller.signal);
    let seen = 0;
    const poll = setInterval(() => {
      void fs.readdir(box.dest).then(
        (names) => {
          seen = Math.max(seen, names.length);
          if (names.length >= 3) controller.abort(reason); // some files written, most not yet
        },
        () => undefined,
      );
    }, 1);
    try {
      await assert.rejects(running, (err) => err === reason);
    } finally {
      clearInterval(poll);
    }
    assert.ok(seen >= 3 && seen < files.length, `aborted mid-archive (saw ${seen} files)`);
    await assertUntouched(box);
  });

  it('refuses an existing destination and leaves it alone', async () => {
    const box = await sandbox();
    await writeTarGz(box.archive, [{ path: 'a.txt', content: 'x' }]);
    await fs.mkdir(box.dest);
    await fs.writeFile(path.join(box.dest, 'previous.txt'), 'keep');
    await assert.rejects(extractArchive(box.archive, box.dest, LIMITS), { code: 'EEXIST' });
    assert.equal(await fs.readFile(path.join(box.dest, 'previous.txt'), 'utf8'), 'keep');
  });
});

describe('writeFileInside', () => {
  async function root(): Promise<{ box: Sandbox; dir: string }> {
    const box = await sandbox();
    const dir = path.join(box.dir, 'dest');
    await fs.mkdir(dir);
    return { box, dir };
  }

  it('writes a file at the root, replacing an existing one', async () => {
    const { dir } = await root();
    await fs.writeFile(path.join(dir, 'Dockerfile'), 'old');
    await writeFileInside(dir, 'Dockerfile', 'FROM node:20\n');
    assert.equal(await fs.readFile(path.join(dir, 'Dockerfile'), 'utf8'), 'FROM node:20\n');
    assert.deepEqual(await fs.readdir(dir), ['Dockerfile'], 'no temp file left behind');
  });

  it('creates parent directories for a nested path', async () => {
    const { dir } = await root();
    await writeFileInside(dir, 'docker/build/Dockerfile.prod', 'FROM scratch\n');
    assert.equal(await fs.readFile(path.join(dir, 'docker/build/Dockerfile.prod'), 'utf8'), 'FROM scratch\n');
  });

  it('refuses .. and absolute paths', async () => {
    const { box, dir } = await root();
    await assert.rejects(writeFileInside(dir, '../outside/pwned', 'x'), { code: 'validation_error' });
    await assert.rejects(writeFileInside(dir, 'a/../../outside/pwned', 'x'), { code: 'validation_error' });
    await assert.rejects(writeFileInside(dir, path.join(box.outside, 'pwned'), 'x'), { code: 'validation_error' });
    await assert.rejects(writeFileInside(dir, '.', 'x'), { code: 'validation_error' });
    assert.deepEqual(await fs.readdir(box.outside), ['sentinel.txt']);
  });

  it('refuses a path through a symlink', async () => {
    const { box, dir } = await root();
    await fs.symlink(box.outside, path.join(dir, 'link'));
    await assert.rejects(writeFileInside(dir, 'link/pwned', 'x'), { code: 'validation_error', message: /passes through a symbolic link/ });
    await assert.rejects(writeFileInside(dir, 'link/sub/pwned', 'x'), { code: 'validation_error' });
    assert.deepEqual(await fs.readdir(box.outside), ['sentinel.txt']);
  });

  it('replaces a symlink at the final component instead of writing through it', async () => {
    const { box, dir } = await root();
    await fs.symlink(path.join(box.outside, 'sentinel.txt'), path.join(dir, 'Dockerfile'));
    await writeFileInside(dir, 'Dockerfile', 'FROM scratch\n');
    assert.equal(await fs.readFile(path.join(box.outside, 'sentinel.txt'), 'utf8'), SENTINEL);
    assert.ok((await fs.lstat(path.join(dir, 'Dockerfile'))).isFile());
    assert.equal(await fs.readFile(path.join(dir, 'Dockerfile'), 'utf8'), 'FROM scratch\n');
  });

  it('refuses to replace a directory', async () => {
    const { dir } = await root();
    await fs.mkdir(path.join(dir, 'Dockerfile'));
    await assert.rejects(writeFileInside(dir, 'Dockerfile', 'x'), { code: 'validation_error', message: /is a directory/ });
  });
});

/** Bytes in the files under `dir` (0 if it does not exist); files vanishing while counted are skipped. */
async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  let names: string[];
  try {
    names = await fs.readdir(dir, { recursive: true });
  } catch {
    return 0;
  }
  for (const name of names) {
    const st = await fs.lstat(path.join(dir, name)).catch(() => undefined);
    if (st?.isFile() === true) total += st.size;
  }
  return total;
}
