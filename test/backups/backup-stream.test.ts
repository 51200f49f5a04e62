// Unit tests of the encrypted backup format: round trips of many sizes, and every kind of tampering or truncation refused as "tampered or corrupt".
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, test } from 'node:test';
import { decryptStream, encryptStream } from '../../src/backups/backup-stream.js';

const key = crypto.randomBytes(32);

async function collect(source: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of source) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Feeds `data` in pieces of `piece` bytes (the network's arbitrary splits). */
const pieces = (data: Buffer, piece: number): Readable => Readable.from((function* () {
  for (let i = 0; i < data.length; i += piece) yield data.subarray(i, i + piece);
})());

const encrypt = (plain: Buffer, chunk = 1000): Promise<Buffer> => collect(pieces(plain, 333).pipe(encryptStream(key, chunk)));
const decrypt = async (sealed: Buffer<ArrayBufferLike>, withKey: Buffer<ArrayBufferLike> = key, piece = 517): Promise<Buffer> => {
  const out: Buffer[] = [];
  await pipeline(pieces(sealed, piece), decryptStream(withKey), async function* (source) {
    for await (const c of source) out.push(c as Buffer);
  });
  return Buffer.concat(out);
};

describe('backup stream format', () => {
  test('round trips empty, one-chunk, exact-multiple and multi-chunk streams, split anywhere', async () => {
    for (const size of [0, 1, 999, 1000, 3000, 12_345]) {
      const plain = crypto.randomBytes(size);
      const sealed = await encrypt(plain);
      assert.ok(sealed.subarray(0, 8).equals(Buffer.from('SLIPWAYB')), 'the header starts with the magic');
      // 16 random bytes turn up in the object by chance with odds of about 2^-128 per offset; a shorter plaintext could (one byte nearly always does).
      if (size >= 16) assert.ok(!sealed.includes(plain.subarray(0, 16)), 'no plaintext in the object');
      for (const piece of [1, 29, 4096]) assert.ok((await decrypt(sealed, key, piece)).equals(plain), `size ${size}, pieces of ${piece}`);
    }
  });

  test('a flipped byte anywhere, a cut, a dropped or swapped chunk, trailing bytes or another key: tampered or corrupt', async () => {
    const plain = crypto.randomBytes(3500);
    const sealed = await encrypt(plain);
    const chunkTotal = 17 + 1000 + 16;
    const variants: Array<[string, Buffer<ArrayBufferLike>, Buffer?]> = [
      ['a flipped ciphertext byte', Buffer.from(sealed.map((b, i) => (i === 13 + 17 + 5 ? b ^ 1 : b)))],
      ['a flipped tag byte', Buffer.from(sealed.map((b, i) => (i === sealed.length - 1 ? b ^ 1 : b)))],
      ['a flipped header byte', Buffer.from(sealed.map((b, i) => (i === 12 ? b ^ 1 : b)))],
      ['cut at a chunk boundary', sealed.subarray(0, 13 + chunkTotal * 2)],
      ['cut inside a chunk', sealed.subarray(0, sealed.length - 5)],
      ['the first chunk dropped', Buffer.concat([sealed.subarray(0, 13), sealed.subarray(13 + chunkTotal)])],
      ['two chunks swapped', Buffer.concat([sealed.subarray(0, 13), sealed.subarray(13 + chunkTotal, 13 + 2 * chunkTotal), sealed.subarray(13, 13 + chunkTotal), sealed.subarray(13 + 2 * chunkTotal)])],
      ['trailing bytes', Buffer.concat([sealed, Buffer.from('x')])],
      ['the final flag cleared', Buffer.from(sealed.map((b, i) => (i === 13 + chunkTotal * 3 ? 0 : b)))],
      ['empty', Buffer.alloc(0)],
      ['another key', sealed, crypto.randomBytes(32)],
    ];
    for (const [what, bytes, otherKey] of variants) {
      await assert.rejects(decrypt(bytes, otherKey ?? key), /tampered or corrupt/, what);
    }
  });
});

describe('the standalone decrypt script (scripts/backup-decrypt.mjs)', () => {
  test('decrypts with the installation key alone; refuses a cut object', async () => {
    const { execFile } = await import('node:child_process');
    const fs = await import('node:fs/promises');
    const os = await import('node:os');
    const path = await import('node:path');
    const { PROJECT_ROOT } = await import('../helpers/server.js');
    const { ValueCipher } = await import('../../src/secrets/value-cipher.js');
    const { BACKUP_KEY_INFO } = await import('../../src/backups/backup-stream.js');
    const installationKey = crypto.randomBytes(32);
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-decrypt-'));
    try {
      const keyFile = path.join(dir, 'secret.key');
      await fs.writeFile(keyFile, `${installationKey.toString('base64')}\n`);
      const plain = crypto.randomBytes(2_500_000);
      const sealed = await collect(Readable.from([plain]).pipe(encryptStream(new ValueCipher(installationKey).deriveKey(BACKUP_KEY_INFO))));
      const run = (input: Buffer): Promise<{ code: number; stdout: Buffer; stderr: string }> =>
        new Promise((resolve) => {
          const child = execFile(process.execPath, [path.join(PROJECT_ROOT, 'scripts', 'backup-decrypt.mjs'), '--key-file', keyFile], { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
            resolve({ code: err === null ? 0 : Number((err as { code?: number }).code ?? 1), stdout, stderr: stderr.toString() }),
          );
          child.stdin!.end(input);
        });
      const ok = await run(sealed);
      assert.equal(ok.code, 0, ok.stderr);
      assert.ok(ok.stdout.equals(plain));
      const cut = await run(sealed.subarray(0, sealed.length - 100));
      assert.notEqual(cut.code, 0);
      assert.match(cut.stderr, /tampered or corrupt/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
