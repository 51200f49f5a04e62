// One WebSocket joined to one byte stream, both ways, with no stream wrapper in between: `slipway db connect`'s relay at both ends.
import type { OnReadOpts } from 'node:net';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/** The size of a lent read: a bulk transfer moves in frames this large (Node's own reads are 64 KiB). */
const READ_SIZE = 256 * 1024;
/** Bytes the WebSocket may hold unsent before the stream is paused; it reads again below a quarter of it. */
const HIGH_WATER = 1024 * 1024;
/** How long a closing WebSocket waits for the peer's close frame before it is cut. */
const CLOSE_GRACE_MS = 5_000;

/**
 * Every chunk read from `stream` leaves as one binary message, every message received is written to
 * `stream`, each side paused while the other cannot keep up (the stream while the WebSocket holds
 * more than {@link HIGH_WATER} unsent; the WebSocket while the stream needs a drain). The end of
 * either side closes the other (the WebSocket with 1000, or 1011 after a stream error, unless it is
 * already closing with a code of its caller's; the stream ended); `onEnd` is called once, however it
 * ended, and destroys the stream if it must. Without the Duplex that `createWebSocketStream` puts between the two, each
 * chunk costs one send or one write and no stream buffering: the relay's CPU per MiB is what a bulk
 * transfer (`COPY … TO STDOUT`) through `db connect` is bound by.
 */
export function relayWebSocket(ws: WebSocket, stream: Duplex, onEnd: () => void, reads?: RelayReads): void {
  let ended = false;
  let streamPaused = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    stream.off('data', onData);
    if (ws.readyState === ws.OPEN) ws.close(stream.errored === null ? 1000 : 1011);
    // A peer that never answers the close frame is cut after a while.
    if (ws.readyState !== ws.CLOSED) setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
    onEnd();
  };
  const afterSend = (err?: Error): void => {
    if (err !== undefined && err !== null) return end();
    if (streamPaused && ws.bufferedAmount < HIGH_WATER / 4) {
      streamPaused = false;
      stream.resume();
    }
  };
  const onData = (chunk: Buffer): void => {
    if (ws.readyState !== ws.OPEN) return;
    ws.send(chunk, { binary: true }, afterSend);
    if (!streamPaused && ws.bufferedAmount >= HIGH_WATER) {
      streamPaused = true;
      stream.pause();
    }
  };
  stream.on('data', onData);
  reads?.deliverTo((bytes) => {
    if (ended) return;
    onData(bytes);
    // Bytes the socket could not take at once stay referenced by the pending write: the next
    // reads land in a fresh buffer. Otherwise the kernel has copied them and the buffer is free.
    if (ws.bufferedAmount > 0) reads.renew();
  });
  stream.on('end', end);
  stream.on('error', end);
  stream.on('close', end);
  stream.on('drain', () => {
    if (ws.isPaused) ws.resume();
  });
  ws.on('message', (data: Buffer) => {
    if (ended) return;
    if (!stream.write(data) && !ws.isPaused) ws.pause();
  });
  ws.on('close', () => {
    if (!stream.destroyed) stream.end();
    end();
  });
  ws.on('error', end);
  if (stream.isPaused()) stream.resume();
}

/**
 * Reads for {@link relayWebSocket} through net's `onread`: large (256 KiB: a quarter of the frames,
 * events and writes of Node's 64 KiB reads) and into one buffer reused while each read leaves at
 * once (no fresh allocation, no garbage per read). Pass {@link onread} to the socket's `connect`
 * and the object to the relay; a stream that ignores `onread` (not a socket) emits 'data' as usual.
 */
export class RelayReads {
  #buffer = Buffer.allocUnsafe(READ_SIZE);
  #deliver: ((bytes: Buffer) => void) | undefined;
  readonly onread: OnReadOpts = {
    buffer: () => this.#buffer,
    callback: (size: number, buffer: Uint8Array) => {
      this.#deliver?.(Buffer.from(buffer.buffer, buffer.byteOffset, size));
      return true; // the relay pauses the socket itself
    },
  };

  /** @internal */
  deliverTo(deliver: (bytes: Buffer) => void): void {
    this.#deliver = deliver;
  }

  /** @internal The last read is still referenced by a pending write: reads go to a new buffer. */
  renew(): void {
    this.#buffer = Buffer.allocUnsafe(READ_SIZE);
  }
}
