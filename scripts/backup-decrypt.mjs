#!/usr/bin/env node
// Decrypts a Slipway backup object without Slipway (docs/backups.md): node backup-decrypt.mjs --key-file secret.key < backup.slwb > dump
// Plain Node.js, no dependencies: copy it anywhere. Exit 0 only when the whole object decrypted and its final chunk was seen.
import crypto from 'node:crypto';
import fs from 'node:fs';

const args = process.argv.slice(2);
const at = args.indexOf('--key-file');
if (at === -1 || args[at + 1] === undefined) {
  process.stderr.write('usage: backup-decrypt.mjs --key-file FILE < backup > plaintext\n  FILE holds the installation key in base64 (<data dir>/secret.key, or the value of SLIPWAY_SECRET_KEY)\n');
  process.exit(2);
}
const installationKey = Buffer.from(fs.readFileSync(args[at + 1], 'utf8').trim(), 'base64');
if (installationKey.length !== 32) fail('the key file must hold 32 bytes in base64');
// The backup key: HKDF-SHA256 of the installation key, empty salt, info "slipway backup stream v1", 32 bytes.
const key = Buffer.from(crypto.hkdfSync('sha256', installationKey, Buffer.alloc(0), Buffer.from('slipway backup stream v1'), 32));

function fail(message) {
  process.stderr.write(`backup-decrypt: ${message}\n`);
  process.exit(1);
}

let buffer = Buffer.alloc(0);
let header;
let index = 0n;
let finished = false;

function take() {
  if (header === undefined) {
    if (buffer.length < 13) return false;
    header = buffer.subarray(0, 13);
    if (header.subarray(0, 8).toString('ascii') !== 'SLIPWAYB') fail('tampered or corrupt: not a Slipway backup');
    if (header[8] !== 1) fail(`tampered or corrupt: unknown format version ${header[8]}`);
    buffer = buffer.subarray(13);
  }
  if (buffer.length === 0) return false;
  if (finished) fail('tampered or corrupt: bytes after the final chunk');
  if (buffer.length < 17) return false;
  const flag = buffer[0];
  const length = buffer.readUInt32BE(1);
  if (flag > 1 || length > header.readUInt32BE(9)) fail('tampered or corrupt: bad chunk header');
  const total = 17 + length + 16;
  if (buffer.length < total) return false;
  const aad = Buffer.alloc(22);
  header.copy(aad, 0);
  aad.writeBigUInt64BE(index, 13);
  aad[21] = flag;
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, buffer.subarray(5, 17));
  decipher.setAAD(aad);
  decipher.setAuthTag(buffer.subarray(total - 16, total));
  let plain;
  try {
    plain = Buffer.concat([decipher.update(buffer.subarray(17, total - 16)), decipher.final()]);
  } catch {
    fail(`tampered or corrupt: chunk ${index} fails its authentication tag (or this is not the key that encrypted it)`);
  }
  process.stdout.write(plain);
  index += 1n;
  if (flag === 1) finished = true;
  buffer = buffer.subarray(total);
  return true;
}

for await (const data of process.stdin) {
  buffer = Buffer.concat([buffer, data]);
  while (take());
}
if (!finished || buffer.length > 0) fail('tampered or corrupt: the backup ends before its final chunk');
