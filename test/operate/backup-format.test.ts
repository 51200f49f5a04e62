// The self-backup file format: a round trip over several frames; a wrong key, a truncated, altered, extended or reordered file each fail clearly.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { BackupReadError, decryptingStream, encryptingStream, newHeader, type SelfBackupHeader } from '../../src/operate/backup-format.js';

const KEY = crypto.randomBytes(32);
const FACTS = { version: '1.2.3', schema: '2026-11-28-100-schema-version', database: 'sqlite' as const };

async function encrypt(plain: Buffer, key = KEY): Promise<Buffer> {
  const { header, key: derived } = newHeader(key, FACTS);
  const chunks: Buffer[] = [];
  // Written in odd-sized pieces, as a tar stream would.
  const pieces = [];
  for (let i = 0; i < plain.length; i += 65_537) pieces.push(plain.subarray(i, i + 65_537));
  await pipeline(Readable.from(pieces), encryptingStream(header, derived), new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c), cb()) }));
  return Buffer.concat(chunks);
}

async function decrypt(file: Buffer, key = KEY, onHeader: (h: SelfBackupHeader) => void = () => undefined): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const pieces = [];
  for (let i = 0; i < file.length; i += 10_007) pieces.push(file.subarray(i, i + 10_007));
  await pipeline(Readable.from(pieces), decryptingStream(key, onHeader), new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c), cb()) }));
  return Buffer.concat(chunks);
}

const fails = (reason: BackupReadError['reason']) => (err: unknown) => err instanceof BackupReadError && err.reason === reason;

test('a payload of several frames comes back whole, with its header; an empty one too', async () => {
  const plain = crypto.randomBytes(2.5 * 1024 * 1024);
  const file = await encrypt(plain);
  let seen: SelfBackupHeader | undefined;
  assert.ok((await decrypt(file, KEY, (h) => (seen = h))).equals(plain));
  assert.equal(seen?.version, '1.2.3');
  assert.equal(seen?.schema, FACTS.schema);
  assert.equal((await decrypt(await encrypt(Buffer.alloc(0)))).length, 0);
  // The installation key appears nowhere in the file.
  assert.equal(file.indexOf(KEY), -1);
  assert.equal(file.indexOf(Buffer.from(KEY.toString('base64'))), -1);
});

test('the wrong key, a truncated file, an altered byte or header, data appended, or not a backup at all: each a clear error', async () => {
  const plain = crypto.randomBytes(1.5 * 1024 * 1024);
  const file = await encrypt(plain);
  await assert.rejects(decrypt(file, crypto.randomBytes(32)), fails('wrong_key'));
  await assert.rejects(decrypt(file.subarray(0, file.length - 100)), fails('truncated'));
  // Cut exactly after the first (whole, non-final) frame: still truncated.
  const headerEnd = file.indexOf(Buffer.from('}')) + 1;
  await assert.rejects(decrypt(file.subarray(0, headerEnd + 4 + 1024 * 1024 + 16)), fails('truncated'));
  const flipped = Buffer.from(file);
  flipped[file.length - 40] = (flipped[file.length - 40] ?? 0) ^ 1;
  await assert.rejects(decrypt(flipped), fails('corrupt'));
  const relabelled = Buffer.from(file.toString('latin1').replace('"version":"1.2.3"', '"version":"1.2.4"'), 'latin1');
  await assert.rejects(decrypt(relabelled), fails('corrupt'));
  await assert.rejects(decrypt(Buffer.concat([file, file.subarray(headerEnd)])), fails('corrupt'));
  await assert.rejects(decrypt(Buffer.from('just some text that is not a backup file at all\n')), fails('not_a_backup'));
});

test('the header is seen before any payload, and a refusal there stops the read', async () => {
  const file = await encrypt(Buffer.from('payload'));
  let payload = 0;
  await assert.rejects(
    pipeline(Readable.from([file]), decryptingStream(KEY, () => { throw new Error('too new'); }), new Writable({ write: (c: Buffer, _e, cb) => ((payload += c.length), cb()) })),
    /too new/,
  );
  assert.equal(payload, 0);
});
