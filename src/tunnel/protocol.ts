// Tunnel wire protocol: binary stream frames and JSON control messages carried over one WebSocket.

/**
 * Binary frame layout (one WebSocket binary message per frame):
 *
 *   [type u8][streamId u32 big-endian][payload …]
 *
 * - OPEN   (server → client) payload: JSON {@link OpenHead}. Starts stream `streamId`.
 * - HEAD   (client → server) payload: JSON {@link ResponseHead}. The local app's response head.
 * - DATA   payload: body bytes. Never more than the receiver's remaining window for the stream.
 * - END    no payload. The sender will send no more DATA on this stream (half-close).
 * - RESET  payload: UTF-8 reason. The stream is dead in both directions; its id is freed at once.
 * - WINDOW payload: u32 credit. The receiver consumed that many bytes; the sender may send them again.
 *
 * Small frames sent in the same event-loop turn travel together in one BATCH message:
 *
 *   [0x7f][u32 length][frame][u32 length][frame]…
 *
 * so a small request costs one WebSocket message each way instead of two or three.
 *
 * Upgrades (`isUpgrade: true`) carry no HEAD: after OPEN the stream is a raw byte pipe and the
 * local app's own `101 Switching Protocols` (or refusal) travels in DATA frames.
 *
 * Control messages are WebSocket text messages holding JSON {@link ControlMessage}.
 */
export const FrameType = {
  OPEN: 1,
  HEAD: 2,
  DATA: 3,
  END: 4,
  RESET: 5,
  WINDOW: 6,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

/** Protocol version announced in READY; a client refuses a server speaking another major. */
export const PROTOCOL_VERSION = 2;
/** First byte of a message that carries several frames. */
export const BATCH_MARKER = 0x7f;
/** Bytes each side may send on a stream before it receives credit. */
export const INITIAL_WINDOW = 256 * 1024;
/** Largest DATA payload in one frame: small enough that streams interleave fairly. */
export const MAX_DATA_PAYLOAD = 64 * 1024;
/** Largest WebSocket message either side accepts (a frame, or a head with big headers). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
/** Bytes in a frame header. */
export const FRAME_HEADER_BYTES = 5;
/** WebSocket close code after which the client must not reconnect: the API key was deleted. */
export const CLOSE_KEY_REVOKED = 4401;
/** WebSocket close code after which the client must not reconnect: a newer connection took the name. */
export const CLOSE_REPLACED = 4409;
/** The API path a tunnel client connects to. */
export const CONNECT_PATH = '/api/v1/tunnels/connect';

/** A visitor's request head, as the server forwards it to the client. */
export interface OpenHead {
  readonly method: string;
  /** Path and query, as received (`req.url`). */
  readonly path: string;
  /** Flat `[name, value, name, value, …]` list, like `IncomingMessage.rawHeaders`. */
  readonly headers: string[];
  readonly isUpgrade: boolean;
}

/** The local app's response head, as the client forwards it to the server. */
export interface ResponseHead {
  readonly status: number;
  /** Flat `[name, value, …]` list, hop-by-hop headers already removed. */
  readonly headers: string[];
}

/**
 * Control messages (JSON text).
 * - `ready` (server → client) once the tunnel is live: the name and URL it serves.
 * - `error` (server → client) just before the server closes the tunnel for good (key deleted,
 *   name replaced): the client prints `message` and must not reconnect.
 */
export type ControlMessage =
  | {
      readonly type: 'ready';
      readonly version: number;
      readonly tunnelId: string;
      readonly subdomain: string;
      readonly url: string;
      readonly heartbeatMs: number;
      readonly maxStreams: number;
    }
  | { readonly type: 'error'; readonly error: string; readonly message: string };

/** A decoded binary frame; `payload` is a view into the received message (no copy). */
export interface Frame {
  readonly type: FrameType;
  readonly streamId: number;
  readonly payload: Buffer;
}

const EMPTY = Buffer.alloc(0);

/** Encodes one frame into a fresh buffer (header followed by a copy of `payload`). */
export function encodeFrame(type: FrameType, streamId: number, payload: Buffer = EMPTY): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt8(type, 0);
  frame.writeUInt32BE(streamId, 1);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

/** Encodes a frame whose payload is JSON (OPEN, HEAD). */
export function encodeJsonFrame(type: FrameType, streamId: number, value: OpenHead | ResponseHead): Buffer {
  return encodeFrame(type, streamId, Buffer.from(JSON.stringify(value), 'utf8'));
}

/** Encodes a WINDOW frame granting `credit` bytes. */
export function encodeWindow(streamId: number, credit: number): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
  frame.writeUInt8(FrameType.WINDOW, 0);
  frame.writeUInt32BE(streamId, 1);
  frame.writeUInt32BE(credit, FRAME_HEADER_BYTES);
  return frame;
}

/** Packs several frames into one BATCH message. */
export function encodeBatch(frames: readonly Buffer[]): Buffer {
  let size = 1;
  for (const frame of frames) size += 4 + frame.length;
  const message = Buffer.allocUnsafe(size);
  message.writeUInt8(BATCH_MARKER, 0);
  let offset = 1;
  for (const frame of frames) {
    message.writeUInt32BE(frame.length, offset);
    frame.copy(message, offset + 4);
    offset += 4 + frame.length;
  }
  return message;
}

/** The frames of a binary message (one, or several in a BATCH); null when the batch is malformed. */
export function splitMessage(message: Buffer): Buffer[] | null {
  if (message.length === 0 || message[0] !== BATCH_MARKER) return [message];
  const frames: Buffer[] = [];
  let offset = 1;
  while (offset < message.length) {
    if (offset + 4 > message.length) return null;
    const length = message.readUInt32BE(offset);
    if (offset + 4 + length > message.length) return null;
    frames.push(message.subarray(offset + 4, offset + 4 + length));
    offset += 4 + length;
  }
  return frames;
}

/** Decodes a binary message; null when it is not a well-formed frame of a known type. */
export function decodeFrame(message: Buffer): Frame | null {
  if (message.length < FRAME_HEADER_BYTES) return null;
  const type = message.readUInt8(0);
  if (type < FrameType.OPEN || type > FrameType.WINDOW) return null;
  const payload = message.subarray(FRAME_HEADER_BYTES);
  if (type === FrameType.WINDOW && payload.length !== 4) return null;
  return { type: type as FrameType, streamId: message.readUInt32BE(1), payload };
}

/** Reads a WINDOW frame's credit. */
export function readCredit(frame: Frame): number {
  return frame.payload.readUInt32BE(0);
}

/** Parses an OPEN payload; null when malformed. */
export function parseOpenHead(payload: Buffer): OpenHead | null {
  const value = parseJson(payload);
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v['method'] !== 'string' || typeof v['path'] !== 'string' || typeof v['isUpgrade'] !== 'boolean') return null;
  const headers = parseHeaderList(v['headers']);
  if (headers === null) return null;
  return { method: v['method'], path: v['path'], headers, isUpgrade: v['isUpgrade'] };
}

/** Parses a HEAD payload; null when malformed. */
export function parseResponseHead(payload: Buffer): ResponseHead | null {
  const value = parseJson(payload);
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  const status = v['status'];
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 999) return null;
  const headers = parseHeaderList(v['headers']);
  if (headers === null) return null;
  return { status, headers };
}

/** Parses a control (text) message; null when malformed. */
export function parseControl(text: string): ControlMessage | null {
  const value = parseJson(Buffer.from(text, 'utf8'));
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (v['type'] === 'error' && typeof v['error'] === 'string' && typeof v['message'] === 'string') {
    return { type: 'error', error: v['error'], message: v['message'] };
  }
  if (
    v['type'] === 'ready' &&
    typeof v['version'] === 'number' &&
    typeof v['tunnelId'] === 'string' &&
    typeof v['subdomain'] === 'string' &&
    typeof v['url'] === 'string' &&
    typeof v['heartbeatMs'] === 'number' &&
    typeof v['maxStreams'] === 'number'
  ) {
    return {
      type: 'ready',
      version: v['version'],
      tunnelId: v['tunnelId'],
      subdomain: v['subdomain'],
      url: v['url'],
      heartbeatMs: v['heartbeatMs'],
      maxStreams: v['maxStreams'],
    };
  }
  return null;
}

/** Headers that describe one hop's connection, never forwarded (RFC 9110 §7.6.1); `proxy-*` by prefix. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Drops hop-by-hop headers (and any named in `Connection`) from a flat raw header list.
 * Upgrades keep `Connection` and `Upgrade`, which the local app needs to switch protocols.
 */
export function stripHopByHop(rawHeaders: readonly string[], keepUpgrade = false): string[] {
  const named = new Set<string>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() === 'connection') {
      for (const token of (rawHeaders[i + 1] ?? '').split(',')) named.add(token.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    const lower = name.toLowerCase();
    const keep = keepUpgrade && (lower === 'connection' || lower === 'upgrade');
    if (!keep && (HOP_BY_HOP.has(lower) || named.has(lower) || lower.startsWith('proxy-'))) continue;
    out.push(name, rawHeaders[i + 1] ?? '');
  }
  return out;
}

function parseHeaderList(value: unknown): string[] | null {
  if (!Array.isArray(value) || value.length % 2 !== 0) return null;
  for (const item of value) if (typeof item !== 'string') return null;
  return value as string[];
}

function parseJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    return null;
  }
}
