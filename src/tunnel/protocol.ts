// Tunnel wire protocol: binary stream frames and JSON control messages carried over one WebSocket.

/**
 * Binary frame layout (one WebSocket binary message per frame):
 *
 *   [type u8][streamId u32 big-endian][payload …]
 *
 * - OPEN   (server → client) no payload. Starts stream `streamId`: the client connects to the local
 *   app and from then on the stream is a raw byte pipe to that TCP connection (the server speaks
 *   HTTP/1.1 over it, keep-alive, so one stream carries many sequential requests; or a WebSocket).
 * - DATA   payload: bytes. Never more than the receiver's remaining window for the stream.
 * - END    no payload. The sender will send no more DATA on this stream (half-close).
 * - RESET  payload: UTF-8 reason. The stream is dead in both directions; its id is freed at once.
 *   The client resets a stream whose local connect failed with a reason starting `refused`.
 * - WINDOW payload: u32 credit. The receiver consumed that many bytes; the sender may send them again.
 *
 * (Type 2 carried a JSON response head in protocol 2; it is no longer valid.)
 *
 * Small frames sent in the same event-loop turn travel together in one BATCH message:
 *
 *   [0x7f][u32 length][frame][u32 length][frame]…
 *
 * so a small request costs one WebSocket message each way instead of two or three.
 *
 * Control messages are WebSocket text messages holding JSON {@link ControlMessage}.
 */
export const FrameType = {
  OPEN: 1,
  DATA: 3,
  END: 4,
  RESET: 5,
  WINDOW: 6,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

/** Protocol version announced in READY; a client refuses a server speaking another major. */
export const PROTOCOL_VERSION = 3;
/** First byte of a message that carries several frames. */
export const BATCH_MARKER = 0x7f;
/** Bytes each side may send on a stream before it receives credit. */
export const INITIAL_WINDOW = 256 * 1024;
/** Largest DATA payload in one frame: small enough that streams interleave fairly. */
export const MAX_DATA_PAYLOAD = 64 * 1024;
/** Largest WebSocket message either side accepts (a frame, or a head with big headers). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
/**
 * Bytes one side may have queued towards its peer (its WebSocket's send buffer plus frames not yet
 * written), whatever they carry: DATA, RESET, WINDOW, control messages, pings. DATA already stops
 * at 1 MiB (see mux.ts), the rest is small per stream; a peer that makes us queue past this has
 * stopped reading and is disconnected before its buffers grow further.
 */
export const MAX_OUTBOUND_BYTES = 4 * 1024 * 1024;
/** Bytes in a frame header. */
export const FRAME_HEADER_BYTES = 5;
/** WebSocket close code after which the client must not reconnect: the API key was deleted or its account disabled. */
export const CLOSE_KEY_REVOKED = 4401;
/** WebSocket close code after which the client must not reconnect: a newer connection took the name. */
export const CLOSE_REPLACED = 4409;
/** The API path a tunnel client connects to. */
export const CONNECT_PATH = '/api/v1/tunnels/connect';

/** Prefix of the RESET reason the client sends when it cannot connect to the local app. */
export const REFUSED_REASON = 'refused';

/** One finished visitor request, as the server reports it to the client: [method, path, status, ms]. */
export type RequestLogEntry = readonly [method: string, path: string, status: number, ms: number];

/**
 * Control messages (JSON text).
 * - `ready` (server → client) once the tunnel is live: the name and URL it serves.
 * - `error` (server → client) just before the server closes the tunnel for good (key deleted,
 *   name replaced): the client prints `message` and must not reconnect.
 * - `requests` (server → client) the visitor requests that finished recently, for the client's log
 *   (the server is the side that speaks HTTP, so only it knows method, path and status).
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
  | { readonly type: 'error'; readonly error: string; readonly message: string }
  | { readonly type: 'requests'; readonly entries: readonly RequestLogEntry[] };

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
  if (type < FrameType.OPEN || type > FrameType.WINDOW || type === 2) return null;
  const payload = message.subarray(FRAME_HEADER_BYTES);
  if (type === FrameType.WINDOW && payload.length !== 4) return null;
  return { type: type as FrameType, streamId: message.readUInt32BE(1), payload };
}

/** Reads a WINDOW frame's credit. */
export function readCredit(frame: Frame): number {
  return frame.payload.readUInt32BE(0);
}

/** Parses a control (text) message; null when malformed. */
export function parseControl(text: string): ControlMessage | null {
  const value = parseJson(Buffer.from(text, 'utf8'));
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (v['type'] === 'error' && typeof v['error'] === 'string' && typeof v['message'] === 'string') {
    return { type: 'error', error: v['error'], message: v['message'] };
  }
  if (v['type'] === 'requests' && Array.isArray(v['entries'])) {
    return { type: 'requests', entries: v['entries'].filter(isLogEntry) };
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

function isLogEntry(value: unknown): value is RequestLogEntry {
  return (
    Array.isArray(value) &&
    value.length === 4 &&
    typeof value[0] === 'string' &&
    typeof value[1] === 'string' &&
    typeof value[2] === 'number' &&
    typeof value[3] === 'number'
  );
}

function parseJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    return null;
  }
}
