// The self-backup file: a plain header, then the payload in AES-256-GCM frames under a key derived from the installation key.
import crypto from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

/**
 * Layout (all integers big-endian):
 *   MAGIC (21 bytes) · u32 header length · header JSON (SelfBackupHeader)
 *   frames: u32 (bit 31: final, bits 0–30: plaintext length ≤ FRAME_BYTES) · ciphertext · 16-byte tag
 * Frame i is sealed with nonce = 4 zero bytes · u64 i, and associated data = SHA-256(header bytes) ·
 * final flag: a reordered, dropped, altered or appended frame, a truncated file (no final frame) or
 * an altered header fails. The key is HKDF-SHA256(installation key, header salt), so every backup
 * has its own key and index nonces never repeat under one key. `key_check` tells a wrong key apart
 * from a corrupt file. The §20 backups (other branch) may later share this format; it is versioned.
 */
export const MAGIC = Buffer.from('SLIPWAY-SELF-BACKUP1\n', 'ascii');
const FRAME_BYTES = 1024 * 1024;
/** The plaintext a frame is sealed in per cipher update (the frame stays one GCM message). */
const SEAL_PIECE_BYTES = 64 * 1024;
const FINAL = 0x8000_0000;
const TAG_BYTES = 16;
const MAX_HEADER_BYTES = 64 * 1024;

/** What a backup says about itself, readable without the key (and authenticated by it). */
export interface SelfBackupHeader {
  readonly format: 1;
  /** The Slipway version that took it, and the newest migration of its database. */
  readonly version: string;
  readonly schema: string;
  readonly created_at: string;
  readonly database: 'sqlite' | 'postgres';
  /** Random, base64: the per-backup key's HKDF salt. */
  readonly salt: string;
  /** HMAC of a fixed text under the per-backup key, base64: a wrong installation key is told apart from a corrupt file. */
  readonly key_check: string;
}

/** A backup that cannot be read: a wrong key, a truncated or altered file, or not a self-backup at all. */
export class BackupReadError extends Error {
  override readonly name = 'BackupReadError';
  constructor(
    readonly reason: 'not_a_backup' | 'wrong_key' | 'corrupt' | 'truncated',
    message: string,
  ) {
    super(message);
  }
}

function deriveKey(installationKey: Buffer, salt: Buffer): Buffer {
  return Buffer.from(crypto.hkdfSync('sha256', installationKey, salt, 'slipway self-backup v1', 32));
}

function keyCheck(key: Buffer): string {
  return crypto.createHmac('sha256', key).update('slipway self-backup key check').digest('base64');
}

function nonce(index: number): Buffer {
  const n = Buffer.alloc(12);
  n.writeBigUInt64BE(BigInt(index), 4);
  return n;
}

function aad(headerHash: Buffer, final: boolean): Buffer {
  return Buffer.concat([headerHash, Buffer.from([final ? 1 : 0])]);
}

/** A new header (and its per-backup key) for a backup of `facts`. */
export function newHeader(installationKey: Buffer, facts: Pick<SelfBackupHeader, 'version' | 'schema' | 'database'>): { header: SelfBackupHeader; key: Buffer } {
  const salt = crypto.randomBytes(32);
  const key = deriveKey(installationKey, salt);
  return { header: { format: 1, ...facts, created_at: new Date().toISOString(), salt: salt.toString('base64'), key_check: keyCheck(key) }, key };
}

/**
 * Encrypts a payload stream into the self-backup file: the header first, then sealed frames. Copies
 * as little as it can (on a busy host a backup's cost is mostly copying and fresh memory): a chunk's
 * whole frames are sealed where they lie, only a frame's remainder is gathered in one reused buffer,
 * and each frame goes out as its length word, ciphertext and tag without being joined. Sealing runs
 * on the calling thread: WebCrypto's thread-pool AES-GCM measured 4–10× the CPU time per byte
 * (copies and hand-offs), which a saturated host pays in wall time.
 */
export function encryptingStream(header: SelfBackupHeader, key: Buffer): Transform {
  const headerBytes = Buffer.from(JSON.stringify(header), 'utf8');
  const headerHash = crypto.createHash('sha256').update(headerBytes).digest();
  const aadMore = aad(headerHash, false);
  const aadFinal = aad(headerHash, true);
  let index = 0;
  const gathered = Buffer.allocUnsafe(FRAME_BYTES);
  let filled = 0;
  const seal = (stream: Transform, plain: Buffer, final: boolean): void => {
    const cipher = crypto.createCipheriv('aes-256-gcm', key, nonce(index++));
    cipher.setAAD(final ? aadFinal : aadMore);
    const prefix = Buffer.allocUnsafe(4);
    prefix.writeUInt32BE((final ? FINAL : 0) + plain.length);
    stream.push(prefix);
    // In pieces: each update's output is a new buffer, and a small one is recycled memory where a
    // 1 MiB one is fresh pages every time (on the bench's VM, faulting them in cost more than the AES;
    // 64 KiB stays under glibc's 128 KiB mmap threshold and measured a little faster than 16 KiB).
    for (let at = 0; at < plain.length; at += SEAL_PIECE_BYTES) stream.push(cipher.update(plain.subarray(at, at + SEAL_PIECE_BYTES)));
    cipher.final();
    stream.push(cipher.getAuthTag());
  };
  let started = false;
  const start = (stream: Transform): void => {
    started = true;
    const length = Buffer.alloc(4);
    length.writeUInt32BE(headerBytes.length);
    stream.push(Buffer.concat([MAGIC, length, headerBytes]));
  };
  return new Transform({
    // Frames are 1 MiB: the readable side holds a few of them before backpressure.
    readableHighWaterMark: 4 * FRAME_BYTES,
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      if (!started) start(this);
      let at = 0;
      if (filled > 0) {
        const taken = chunk.copy(gathered, filled, 0, Math.min(chunk.length, FRAME_BYTES - filled));
        filled += taken;
        at = taken;
        if (filled < FRAME_BYTES) return callback();
        seal(this, gathered, false);
        filled = 0;
      }
      while (chunk.length - at >= FRAME_BYTES) {
        seal(this, chunk.subarray(at, at + FRAME_BYTES), false);
        at += FRAME_BYTES;
      }
      filled = chunk.copy(gathered, 0, at);
      callback();
    },
    flush(callback: TransformCallback) {
      if (!started) start(this);
      seal(this, gathered.subarray(0, filled), true);
      callback();
    },
  });
}

/**
 * Reads a self-backup's header from its first bytes: resolves with the header and the bytes after
 * it. Throws BackupReadError('not_a_backup') when the file is not one.
 */
export function parseHeader(first: Buffer): { header: SelfBackupHeader; rest: Buffer } | undefined {
  if (first.length < MAGIC.length + 4) return undefined;
  if (!first.subarray(0, MAGIC.length).equals(MAGIC)) throw new BackupReadError('not_a_backup', 'this file is not a Slipway self-backup');
  const size = first.readUInt32BE(MAGIC.length);
  if (size > MAX_HEADER_BYTES) throw new BackupReadError('corrupt', 'the backup is corrupt (its header is too large)');
  const end = MAGIC.length + 4 + size;
  if (first.length < end) return undefined;
  let header: SelfBackupHeader;
  try {
    header = JSON.parse(first.subarray(MAGIC.length + 4, end).toString('utf8')) as SelfBackupHeader;
  } catch {
    throw new BackupReadError('corrupt', 'the backup is corrupt (its header is not readable)');
  }
  if (header.format !== 1 || typeof header.salt !== 'string' || typeof header.key_check !== 'string' || typeof header.schema !== 'string') {
    throw new BackupReadError('corrupt', `the backup's header is not one this Slipway reads (format ${String(header.format)})`);
  }
  return { header, rest: first.subarray(end) };
}

/**
 * Decrypts a self-backup file stream into its payload. `onHeader` sees the header before any payload
 * (throw there to refuse, e.g. a newer version). Emits BackupReadError on a wrong key, an altered
 * frame, or a file that ends before its final frame. Payload bytes are emitted only once their
 * frame is authenticated; the end of the payload only after the final frame.
 */
export function decryptingStream(installationKey: Buffer, onHeader: (header: SelfBackupHeader) => void): Transform {
  let buffer: Buffer = Buffer.alloc(0);
  let headerBytes: Buffer | undefined;
  let key: Buffer | undefined;
  let headerHash: Buffer | undefined;
  let index = 0;
  let ended = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      try {
        if (key === undefined) {
          const parsed = parseHeader(buffer);
          if (parsed === undefined) return callback();
          headerBytes = buffer.subarray(MAGIC.length + 4, buffer.length - parsed.rest.length);
          headerHash = crypto.createHash('sha256').update(headerBytes).digest();
          const derived = deriveKey(installationKey, Buffer.from(parsed.header.salt, 'base64'));
          const expected = Buffer.from(keyCheck(derived));
          const found = Buffer.from(parsed.header.key_check);
          if (found.length !== expected.length || !crypto.timingSafeEqual(found, expected)) {
            throw new BackupReadError('wrong_key', 'this backup was taken under another installation key (set SLIPWAY_SECRET_KEY, or put the secret.key of the installation it came from in the data directory)');
          }
          onHeader(parsed.header);
          key = derived;
          buffer = parsed.rest;
        }
        while (buffer.length >= 4 && headerHash !== undefined) {
          if (ended) throw new BackupReadError('corrupt', 'the backup is corrupt (data after its end)');
          const word = buffer.readUInt32BE(0);
          const final = word >= FINAL;
          const size = word % FINAL;
          if (size > FRAME_BYTES) throw new BackupReadError('corrupt', 'the backup is corrupt (a frame is too large)');
          if (buffer.length < 4 + size + TAG_BYTES) break;
          const decipher = crypto.createDecipheriv('aes-256-gcm', key, nonce(index++));
          decipher.setAAD(aad(headerHash, final));
          decipher.setAuthTag(buffer.subarray(4 + size, 4 + size + TAG_BYTES));
          let plain: Buffer;
          try {
            plain = Buffer.concat([decipher.update(buffer.subarray(4, 4 + size)), decipher.final()]);
          } catch {
            throw new BackupReadError('corrupt', 'the backup is corrupt or was altered (a frame does not authenticate)');
          }
          buffer = buffer.subarray(4 + size + TAG_BYTES);
          if (final) ended = true;
          if (plain.length > 0) this.push(plain);
        }
        callback();
      } catch (err) {
        callback(err as Error);
      }
    },
    flush(callback: TransformCallback) {
      if (key === undefined) return callback(new BackupReadError(buffer.length < MAGIC.length || buffer.subarray(0, MAGIC.length).equals(MAGIC.subarray(0, buffer.length)) ? 'truncated' : 'not_a_backup', 'the backup is truncated or not a Slipway self-backup'));
      if (!ended || buffer.length > 0) return callback(new BackupReadError('truncated', 'the backup is truncated (it ends before its last frame)'));
      callback();
    },
  });
}
