// The encrypted backup format (docs/backups.md): a header, then AES-256-GCM chunks, each with its own nonce and tag, the last one marked final so a cut is detected.
import crypto from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

/** HKDF-SHA256 `info` of the backup key (no salt), derived from the installation key. */
export const BACKUP_KEY_INFO = 'slipway backup stream v1';
/** `SLIPWAYB`: the first bytes of every backup object. */
export const MAGIC = Buffer.from('SLIPWAYB', 'ascii');
export const FORMAT_VERSION = 1;
/** Plaintext bytes per chunk: what the stream holds at most, twice. */
export const CHUNK_BYTES = 1024 * 1024;
/** Magic (8), version (1), chunk size (4, big-endian). */
const HEADER_BYTES = 13;
/** Flag (1), plaintext length (4, big-endian), nonce (12). */
const CHUNK_HEAD_BYTES = 17;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const FLAG_MORE = 0;
const FLAG_FINAL = 1;

/** A backup object that does not decrypt: a failed tag, a cut, a foreign or damaged header. */
export class BackupCorruptError extends Error {
  override readonly name = 'BackupCorruptError';
  constructor(detail: string) {
    super(`the backup is tampered or corrupt (${detail})`);
  }
}

function header(chunkBytes: number): Buffer {
  const out = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(out, 0);
  out.writeUInt8(FORMAT_VERSION, 8);
  out.writeUInt32BE(chunkBytes, 9);
  return out;
}

/** Associated data of chunk `index`: the header, the index (8 bytes, big-endian) and the flag, so chunks cannot be reordered, dropped or re-flagged. */
function associatedData(head: Buffer, index: bigint, flag: number): Buffer {
  const out = Buffer.alloc(HEADER_BYTES + 9);
  head.copy(out, 0);
  out.writeBigUInt64BE(index, HEADER_BYTES);
  out.writeUInt8(flag, HEADER_BYTES + 8);
  return out;
}

/** Encrypts a byte stream into the format: never holds more than one chunk of plaintext. */
export function encryptStream(key: Buffer, chunkBytes = CHUNK_BYTES): Transform {
  const head = header(chunkBytes);
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let index = 0n;
  const seal = (plain: Buffer, flag: number): Buffer => {
    const nonce = crypto.randomBytes(NONCE_BYTES);
    const cipher = crypto.createCipheriv('aes-256-gcm', key, nonce);
    cipher.setAAD(associatedData(head, index, flag));
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    index += 1n;
    const chunkHead = Buffer.alloc(CHUNK_HEAD_BYTES);
    chunkHead.writeUInt8(flag, 0);
    chunkHead.writeUInt32BE(plain.length, 1);
    nonce.copy(chunkHead, 5);
    return Buffer.concat([chunkHead, body, cipher.getAuthTag()]);
  };
  let started = false;
  return new Transform({
    transform(data: Buffer, _encoding, done: TransformCallback) {
      if (!started) {
        started = true;
        this.push(head);
      }
      pending.push(data);
      pendingBytes += data.length;
      while (pendingBytes >= chunkBytes) {
        const all = Buffer.concat(pending);
        this.push(seal(all.subarray(0, chunkBytes), FLAG_MORE));
        pending = [all.subarray(chunkBytes)];
        pendingBytes = all.length - chunkBytes;
      }
      done();
    },
    flush(done: TransformCallback) {
      if (!started) this.push(head);
      // The last chunk (possibly empty) carries the final flag: a stream without it was cut.
      this.push(seal(Buffer.concat(pending), FLAG_FINAL));
      done();
    },
  });
}

/** Decrypts the format; any failed tag, cut, trailing byte or foreign header fails the stream with BackupCorruptError. */
export function decryptStream(key: Buffer): Transform {
  let buffer: Buffer = Buffer.alloc(0);
  // Pieces received but not yet joined: joined only once a whole chunk may be there (no quadratic copying).
  let parts: Buffer[] = [];
  let partsBytes = 0;
  let needed = HEADER_BYTES;
  let head: Buffer | undefined;
  let chunkBytes = 0;
  let index = 0n;
  let finished = false;
  return new Transform({
    transform(data: Buffer, _encoding, done: TransformCallback) {
      parts.push(data);
      partsBytes += data.length;
      if (buffer.length + partsBytes < needed && !finished) return done();
      buffer = Buffer.concat([buffer, ...parts]);
      parts = [];
      partsBytes = 0;
      try {
        if (head === undefined) {
          if (buffer.length < HEADER_BYTES) return done();
          needed = CHUNK_HEAD_BYTES;
          head = Buffer.from(buffer.subarray(0, HEADER_BYTES));
          if (!head.subarray(0, 8).equals(MAGIC)) throw new BackupCorruptError('not a Slipway backup');
          if (head.readUInt8(8) !== FORMAT_VERSION) throw new BackupCorruptError(`format version ${head.readUInt8(8)} is not known`);
          chunkBytes = head.readUInt32BE(9);
          if (chunkBytes === 0 || chunkBytes > 64 * 1024 * 1024) throw new BackupCorruptError('bad chunk size');
          buffer = buffer.subarray(HEADER_BYTES);
        }
        for (;;) {
          if (buffer.length === 0) {
            needed = CHUNK_HEAD_BYTES;
            break;
          }
          if (finished) throw new BackupCorruptError('bytes after the final chunk');
          if (buffer.length < CHUNK_HEAD_BYTES) {
            needed = CHUNK_HEAD_BYTES;
            break;
          }
          const flag = buffer.readUInt8(0);
          const length = buffer.readUInt32BE(1);
          if ((flag !== FLAG_MORE && flag !== FLAG_FINAL) || length > chunkBytes) throw new BackupCorruptError('bad chunk header');
          const total = CHUNK_HEAD_BYTES + length + TAG_BYTES;
          if (buffer.length < total) {
            needed = total;
            break;
          }
          const decipher = crypto.createDecipheriv('aes-256-gcm', key, buffer.subarray(5, 5 + NONCE_BYTES));
          decipher.setAAD(associatedData(head, index, flag));
          decipher.setAuthTag(buffer.subarray(total - TAG_BYTES, total));
          let plain: Buffer;
          try {
            plain = Buffer.concat([decipher.update(buffer.subarray(CHUNK_HEAD_BYTES, total - TAG_BYTES)), decipher.final()]);
          } catch {
            throw new BackupCorruptError(`chunk ${index} fails its authentication tag`);
          }
          index += 1n;
          if (flag === FLAG_FINAL) finished = true;
          buffer = buffer.subarray(total);
          if (plain.length > 0) this.push(plain);
        }
        done();
      } catch (err) {
        done(err as Error);
      }
    },
    flush(done: TransformCallback) {
      if (partsBytes > 0 || buffer.length > 0) return done(new BackupCorruptError(finished ? 'bytes after the final chunk' : 'the stream ends inside a chunk'));
      if (head === undefined) return done(new BackupCorruptError('no header'));
      if (!finished) return done(new BackupCorruptError('the stream ends before its final chunk'));
      done();
    },
  });
}
