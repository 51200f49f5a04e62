// A container's logs as read with timestamps: multiplexed frames (stream, "<RFC 3339 stamp> <text>") to lines with their stream and time.
import type { OutputLine } from '../engine.js';

/** Nanoseconds since the epoch of an RFC 3339 timestamp with up to nine fraction digits; null when it is not one. */
export function parseStampNs(stamp: string): bigint | null {
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(stamp);
  if (match === null) return null;
  const ms = Date.parse(`${match[1]}${match[3]}`);
  if (Number.isNaN(ms)) return null;
  return BigInt(ms) * 1_000_000n + BigInt((match[2] ?? '').padEnd(9, '0'));
}

/**
 * Lines of a non-follow logs answer read with `timestamps: true` from a container without a TTY:
 * each frame is 8 header bytes (stream 1 stdout / 2 stderr, 3 zero bytes, big-endian size) and one
 * stamped log entry. A line the engine split into several entries (over 16 KiB) is kept as entries.
 */
export function parseStampedLogs(buffer: Buffer): OutputLine[] {
  const lines: OutputLine[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const type = buffer[offset];
    const size = buffer.readUInt32BE(offset + 4);
    if ((type !== 1 && type !== 2) || buffer[offset + 1] !== 0 || buffer[offset + 2] !== 0 || buffer[offset + 3] !== 0) break;
    const payload = buffer.subarray(offset + 8, offset + 8 + size).toString('utf8');
    offset += 8 + size;
    const space = payload.indexOf(' ');
    const atNs = space === -1 ? null : parseStampNs(payload.slice(0, space));
    if (atNs === null) continue;
    lines.push({ stream: type === 2 ? 'stderr' : 'stdout', atNs, text: payload.slice(space + 1).replace(/\r?\n$/, '') });
  }
  return lines;
}
