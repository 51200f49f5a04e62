// The internal listener behind HAProxy: reads the PROXY protocol v2 header, then hands the connection to the HTTP server.
import { createServer, type Server, type Socket } from 'node:net';
import type { Server as HttpServer } from 'node:http';

const SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
/** A header is small; anything longer than this is not one. */
const MAX_HEADER = 16 + 216 + 1024;

/** PP2_TYPE_UNIQUE_ID: HAProxy's `proxy-v2-options unique-id`, set to {@link LATE_HEAD_MARK} on a head it waited for in vain. */
const TLV_UNIQUE_ID = 0x05;
/** The unique id HAProxy sends with a connection whose first head did not arrive within its inspect delay (haproxy-config.ts). */
export const LATE_HEAD_MARK = 'late';
/** Bytes of the address block, by address family (TCP4, TCP6, UNIX). */
const ADDRESS_BYTES: Record<number, number> = { 1: 12, 2: 36, 3: 216 };

/** Connections whose first head HAProxy already waited the whole head timeout for. */
const waitedForHead = new WeakSet<Socket>();

/** Whether HAProxy already waited the head timeout for this connection's first head (it was handed over raw, still incomplete). */
export function headAlreadyWaited(socket: Socket): boolean {
  return waitedForHead.has(socket);
}

/** The addresses a PROXY v2 header carries (undefined for LOCAL connections, e.g. health checks). */
export interface ProxiedAddress {
  readonly address: string;
  readonly port: number;
}

/**
 * Parses a PROXY protocol v2 header at the start of `data`: `{length, source}` once it is whole,
 * `'incomplete'` while more bytes are needed, or an Error when the bytes are not a v2 header.
 */
export function parseProxyV2(data: Buffer): { length: number; source: ProxiedAddress | undefined; uniqueId?: string } | 'incomplete' | Error {
  const prefix = Math.min(data.length, SIGNATURE.length);
  if (!data.subarray(0, prefix).equals(SIGNATURE.subarray(0, prefix))) return new Error('not a PROXY v2 header');
  if (data.length < 16) return 'incomplete';
  const versionCommand = data[12] ?? 0;
  if (versionCommand >> 4 !== 2) return new Error('unsupported PROXY protocol version');
  const length = 16 + data.readUInt16BE(14);
  if (length > MAX_HEADER) return new Error('PROXY header too long');
  if (data.length < length) return 'incomplete';
  const command = versionCommand & 0x0f;
  if (command === 0) return { length, source: undefined }; // LOCAL
  if (command !== 1) return new Error('unsupported PROXY command');
  const family = (data[13] ?? 0) >> 4;
  const uniqueId = tlv(data.subarray(16 + (ADDRESS_BYTES[family] ?? 0), length), TLV_UNIQUE_ID)?.toString('latin1');
  const extra = uniqueId === undefined ? {} : { uniqueId };
  if (family === 1 && length >= 16 + 12) {
    const address = [data[16], data[17], data[18], data[19]].join('.');
    return { length, source: { address, port: data.readUInt16BE(24) }, ...extra };
  }
  if (family === 2 && length >= 16 + 36) {
    const groups: string[] = [];
    for (let i = 0; i < 8; i++) groups.push(data.readUInt16BE(16 + i * 2).toString(16));
    return { length, source: { address: compressIpv6(groups), port: data.readUInt16BE(48) }, ...extra };
  }
  return { length, source: undefined, ...extra };
}

/** The value of the first TLV of `type` in `block` (type, 16-bit length, value: repeated), or undefined. */
function tlv(block: Buffer, type: number): Buffer | undefined {
  for (let at = 0; at + 3 <= block.length; ) {
    const size = block.readUInt16BE(at + 1);
    if (at + 3 + size > block.length) return undefined;
    if (block[at] === type) return block.subarray(at + 3, at + 3 + size);
    at += 3 + size;
  }
  return undefined;
}

/**
 * The listener for HAProxy's connections to the Node process (a Unix socket in HAProxy's directory). Each connection's PROXY
 * header (which HAProxy writes before anything else) names the visitor; the socket then reports
 * that address as its `remoteAddress`, so every part of Node that looks at the client (the API's
 * rate limits, the per-address cap, X-Forwarded-For of tunnel requests) sees the visitor, and a
 * visitor's own X-Forwarded-* headers stay as untrusted as on the public port. `deliver` takes the
 * connection from there (default: the HTTP server; see front-door.ts).
 */
export function proxyProtocolListener(
  http: HttpServer,
  headerTimeoutMs: number,
  deliver: (socket: Socket) => void = (socket) => http.emit('connection', socket),
): Server {
  const server = createServer((socket: Socket) => {
    let buffered: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), headerTimeoutMs);
    const onError = (): void => {
      clearTimeout(timer);
      socket.destroy();
    };
    const onData = (chunk: Buffer): void => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const parsed = parseProxyV2(buffered);
      if (parsed === 'incomplete') return;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      if (parsed instanceof Error) {
        socket.destroy();
        return;
      }
      if (parsed.source !== undefined) {
        Object.defineProperty(socket, 'remoteAddress', { value: parsed.source.address, configurable: true });
        Object.defineProperty(socket, 'remotePort', { value: parsed.source.port, configurable: true });
        Object.defineProperty(socket, 'remoteFamily', { value: parsed.source.address.includes(':') ? 'IPv6' : 'IPv4', configurable: true });
      }
      if (parsed.uniqueId === LATE_HEAD_MARK) waitedForHead.add(socket);
      // Not paused around the hand-over (see front-door.ts: a paused socket given to Node's HTTP
      // server loses its back-pressure): `deliver` adds its own 'data' listener at once.
      const rest = buffered.subarray(parsed.length);
      if (rest.length > 0) socket.unshift(rest);
      deliver(socket);
    };
    socket.on('data', onData);
    socket.on('error', onError);
  });
  // The HTTP server never listens itself: its head/request timeout checks start on 'listening'.
  server.once('listening', () => http.emit('listening'));
  return server;
}

/** RFC 5952 form of eight hex groups (the longest run of zero groups becomes "::"). */
function compressIpv6(groups: string[]): string {
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLength && j - i > 1) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  if (bestStart === -1) return groups.join(':');
  return `${groups.slice(0, bestStart).join(':')}::${groups.slice(bestStart + bestLength).join(':')}`;
}
