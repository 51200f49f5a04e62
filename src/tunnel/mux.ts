// Stream multiplexer: many flow-controlled Duplex streams over one WebSocket (see protocol.ts).
import { Duplex } from 'node:stream';
import type WebSocket from 'ws';
import {
  FRAME_HEADER_BYTES,
  FrameType,
  INITIAL_WINDOW,
  MAX_OUTBOUND_BYTES,
  MAX_DATA_PAYLOAD,
  decodeFrame,
  encodeBatch,
  encodeFrame,
  encodeWindow,
  parseControl,
  readCredit,
  splitMessage,
} from './protocol.js';
import type { ControlMessage } from './protocol.js';
import { SocketBridge, type BridgeOptions, type StreamEndpoint } from './socket-bridge.js';

export { SocketBridge, type BridgeFilter, type BridgeOptions } from './socket-bridge.js';

/** Bytes queued in the WebSocket above which DATA waits (control frames never wait). */
const WS_HIGH_WATER = 1024 * 1024;
/** Bytes queued in the WebSocket below which waiting streams resume. */
const WS_LOW_WATER = 256 * 1024;
/** Most bytes a WebSocket frame header adds to a message. */
const WS_HEADER_BYTES = 14;
/** Frames at least this big are sent alone (never copied into a batch). */
const BATCH_FRAME_LIMIT = 16 * 1024;
/** A batch is sent as soon as it holds this many bytes. */
const BATCH_BYTES_LIMIT = 64 * 1024;

export interface MuxOptions {
  /** Per-stream window in bytes, the same on both ends (default {@link INITIAL_WINDOW}). */
  window?: number;
  /** Called for each OPEN from the peer; when absent the peer may not open streams (they are reset). */
  onStream?: (stream: TunnelStream) => void;
  /**
   * Called for each OPEN from the peer instead of `onStream`: returns the socket the stream is
   * joined to directly (a {@link SocketBridge}, no Duplex in between). The tunnel client uses it
   * for its connections to the local app.
   */
  onSocketStream?: () => { readonly socket: Duplex; readonly options?: BridgeOptions };
  /** Called for each control (text) message. */
  onControl?: (message: ControlMessage) => void;
  /** Called once when the WebSocket closes; every stream has been destroyed by then. */
  onClose?: (code: number, reason: string) => void;
  /** The WebSocket's own socket, when known: see {@link Mux.attachSocket}. */
  socket?: Duplex;
  /**
   * Bytes that may be queued towards the peer at once (default {@link MAX_OUTBOUND_BYTES}). Queueing
   * anything past it means the peer stopped reading: the WebSocket is terminated at once, every
   * stream is reset, and {@link Mux.overflowed} is true when `onClose` runs.
   */
  outboundLimit?: number;
}

/** Raised on a stream that the peer reset, or that died with its tunnel. */
export class StreamResetError extends Error {
  readonly code = 'ERR_TUNNEL_STREAM_RESET';
  constructor(readonly reason: string) {
    super(`tunnel stream reset: ${reason}`);
    this.name = 'StreamResetError';
  }
}

/**
 * One multiplexed WebSocket. The server side opens streams (raw byte pipes to the local app); the
 * client side receives them through `onStream`. Memory is bounded: a peer may have at most
 * `window` unconsumed bytes in flight per stream, and DATA pauses while the WebSocket's own
 * send buffer is above {@link WS_HIGH_WATER}.
 */
export class Mux {
  readonly #ws: WebSocket;
  readonly #window: number;
  readonly #streams = new Map<number, StreamEndpoint>();
  readonly #options: MuxOptions;
  /** Streams waiting for the WebSocket send buffer to drain, in arrival order. */
  #waiting = new Set<StreamEndpoint>();
  #nextId = 1;
  #closed = false;
  #socket: Duplex | undefined;
  #corked = false;
  /** Small frames waiting to leave together at the end of this event-loop turn. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #pendingTracked = false;
  #flushQueued = false;
  readonly #outboundLimit: number;
  /** Largest number of bytes ever queued towards the peer (send buffer plus the batch being built). */
  #peakOutbound = 0;
  #overflowed = false;
  /** Set once every stream has been torn down. */
  #torn = false;

  constructor(ws: WebSocket, options: MuxOptions = {}) {
    this.#ws = ws;
    this.#window = options.window ?? INITIAL_WINDOW;
    this.#options = options;
    this.#socket = options.socket;
    this.#outboundLimit = options.outboundLimit ?? MAX_OUTBOUND_BYTES;
    ws.binaryType = 'nodebuffer';
    ws.on('message', (data, isBinary) => this.#onMessage(data as Buffer, isBinary));
    ws.on('close', (code, reason) => this.#onClose(code, reason.toString('utf8')));
    // The socket's 'close' always follows an error; streams are torn down there.
    ws.on('error', () => {});
  }

  /**
   * Gives the mux the WebSocket's socket so it can cork it for one event-loop turn: the frames of
   * many small requests (OPEN, DATA, END, WINDOW) then leave in one write instead of one each.
   */
  attachSocket(socket: Duplex): void {
    this.#socket = socket;
  }

  /** Number of live streams. */
  get streamCount(): number {
    return this.#streams.size;
  }

  /** The per-stream window this mux was configured with. */
  get window(): number {
    return this.#window;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** True once the peer was dropped for not reading (see {@link MuxOptions.outboundLimit}). */
  get overflowed(): boolean {
    return this.#overflowed;
  }

  /** The most bytes ever queued towards the peer; never above the outbound limit. */
  get peakOutbound(): number {
    return this.#peakOutbound;
  }

  /** Bytes queued towards the peer right now. */
  get outbound(): number {
    return this.#ws.bufferedAmount + this.#pendingBytes;
  }

  /**
   * Opens a new stream towards the peer (sends OPEN). With `halfOpen: false` the stream ends its
   * own side once the peer's END arrives, as a `net.Socket` does by default (what Node's HTTP
   * client and Agent expect from a socket).
   */
  open(options: { halfOpen?: boolean } = {}): TunnelStream {
    const id = this.#newId();
    const stream = new TunnelStream(id, this, this.#window, options.halfOpen ?? true);
    this.#streams.set(id, stream);
    this.#send(encodeFrame(FrameType.OPEN, id));
    return stream;
  }

  /**
   * Opens a new stream towards the peer and joins it straight to `socket` (see {@link SocketBridge}):
   * what the socket sends goes out as DATA (through `options.filter`), what the peer sends is
   * written to the socket, with the same window and END/RESET rules as a {@link TunnelStream}.
   */
  bridge(socket: Duplex, options: BridgeOptions = {}): SocketBridge {
    const id = this.#newId();
    const bridge = new SocketBridge(id, this, this.#window, socket, options);
    this.#streams.set(id, bridge);
    this.#send(encodeFrame(FrameType.OPEN, id));
    bridge.start();
    return bridge;
  }

  #newId(): number {
    if (this.#closed) throw new Error('tunnel is closed');
    let id = this.#nextId;
    while (this.#streams.has(id)) id = id >= 0xffffffff ? 1 : id + 1;
    this.#nextId = id >= 0xffffffff ? 1 : id + 1;
    return id;
  }

  /**
   * Sends a control message (JSON text). With `droppable`, the message is skipped instead while
   * the link is congested (it is best-effort, like the request log).
   */
  sendControl(message: ControlMessage, options: { droppable?: boolean } = {}): void {
    if (this.#closed || this.#ws.readyState !== this.#ws.OPEN) return;
    if (options.droppable === true && this.outbound > WS_HIGH_WATER) return;
    const text = JSON.stringify(message);
    if (!this.#admit(Buffer.byteLength(text) + WS_HEADER_BYTES)) return;
    this.#flush();
    this.#ws.send(text);
    this.#measure();
  }

  /** Sends a WebSocket ping carrying `payload` (at most 125 bytes); the peer's pong echoes it. */
  ping(payload: Buffer): void {
    if (this.#closed || this.#ws.readyState !== this.#ws.OPEN) return;
    if (!this.#admit(payload.length + WS_HEADER_BYTES)) return;
    this.#ws.ping(payload);
    this.#measure();
  }

  /** Destroys every stream and closes the WebSocket with `code`/`reason`. */
  close(code = 1000, reason = ''): void {
    this.#flush();
    if (this.#ws.readyState === this.#ws.OPEN || this.#ws.readyState === this.#ws.CONNECTING) {
      // A close reason is limited to 123 bytes (RFC 6455 §5.5); ws throws beyond that.
      this.#ws.close(code, truncateUtf8(reason, 123));
    }
    this.#destroyAll(reason || 'tunnel closed');
  }

  // ---- used by TunnelStream -------------------------------------------------------------------

  /** @internal True while DATA must wait for the WebSocket to drain. */
  congested(stream: StreamEndpoint): boolean {
    if (this.#ws.bufferedAmount + this.#pendingBytes <= WS_HIGH_WATER) return false;
    this.#waiting.add(stream);
    return true;
  }

  /**
   * @internal Sends DATA. With `owned` (the caller never changes or reuses the chunk's bytes), a big
   * chunk leaves as it is, never copied into a frame: one message in two WebSocket frames (RFC 6455
   * §5.4), the frame header then the payload. A copy per chunk of an upload was a fresh 64 KiB
   * ArrayBuffer each, garbage the server's heap held until its next GC (issue 33).
   */
  sendData(id: number, chunk: Buffer, owned = false): void {
    if (!owned || chunk.length < BATCH_FRAME_LIMIT) {
      this.#send(encodeFrame(FrameType.DATA, id, chunk), true);
      return;
    }
    if (this.#closed || this.#ws.readyState !== this.#ws.OPEN) return;
    if (!this.#admit(4 + FRAME_HEADER_BYTES + chunk.length + 2 * WS_HEADER_BYTES)) return;
    this.#flush();
    this.#cork();
    this.#ws.send(encodeFrame(FrameType.DATA, id), { binary: true, fin: false });
    this.#ws.send(chunk, { binary: true, fin: true }, () => this.#onFlushed());
    this.#measure();
  }

  /** @internal */
  sendFrame(frame: Buffer): void {
    this.#send(frame);
  }

  /** @internal Called by a stream once it is destroyed. */
  forget(stream: StreamEndpoint): void {
    if (this.#streams.get(stream.id) === stream) this.#streams.delete(stream.id);
    this.#waiting.delete(stream);
  }

  // ---- internals ------------------------------------------------------------------------------

  /**
   * Queues a frame. Small frames are batched until the end of the event-loop turn (or 64 KiB);
   * a large one flushes the queue and goes alone, so frames keep their order and big bodies are
   * never copied into a batch.
   */
  #send(frame: Buffer, tracked = false): void {
    if (this.#closed || this.#ws.readyState !== this.#ws.OPEN) return;
    // Every frame counts, whatever its type: RESETs, WINDOWs and OPENs are not flow controlled.
    if (!this.#admit(4 + frame.length + WS_HEADER_BYTES)) return;
    if (frame.length >= BATCH_FRAME_LIMIT) {
      this.#flush();
      this.#write(frame, tracked);
      return;
    }
    this.#pending.push(frame);
    this.#pendingBytes += 4 + frame.length;
    if (tracked) this.#pendingTracked = true;
    if (this.#pendingBytes >= BATCH_BYTES_LIMIT) {
      this.#flush();
    } else if (!this.#flushQueued) {
      this.#flushQueued = true;
      setImmediate(() => {
        this.#flushQueued = false;
        this.#flush();
      });
    }
  }

  #flush(): void {
    if (this.#pending.length === 0) return;
    const frames = this.#pending;
    const tracked = this.#pendingTracked;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#pendingTracked = false;
    if (this.#closed || this.#ws.readyState !== this.#ws.OPEN) return;
    this.#write(frames.length === 1 ? (frames[0] as Buffer) : encodeBatch(frames), tracked);
  }

  #write(message: Buffer, tracked: boolean): void {
    this.#cork();
    if (tracked) this.#ws.send(message, { binary: true }, () => this.#onFlushed());
    else this.#ws.send(message, { binary: true });
    this.#measure();
  }

  /**
   * True when `bytes` more may be queued towards the peer. Otherwise the peer is not reading: the
   * WebSocket is terminated (nothing more is queued, not even a close frame, which would wait
   * behind the rest) and the streams are reset on the next tick (not inside a caller's write).
   */
  #admit(bytes: number): boolean {
    if (this.outbound + bytes <= this.#outboundLimit) return true;
    if (this.#overflowed) return false;
    this.#overflowed = true;
    this.#closed = true;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#pendingTracked = false;
    this.#ws.terminate();
    process.nextTick(() => this.#destroyAll('tunnel peer stopped reading'));
    return false;
  }

  #measure(): void {
    const outbound = this.outbound;
    if (outbound > this.#peakOutbound) this.#peakOutbound = outbound;
  }

  #cork(): void {
    const socket = this.#socket;
    if (this.#corked || socket === undefined) return;
    this.#corked = true;
    socket.cork();
    setImmediate(() => {
      this.#corked = false;
      socket.uncork();
    });
  }

  #onFlushed(): void {
    if (this.#waiting.size === 0 || this.#ws.bufferedAmount > WS_LOW_WATER) return;
    const waiting = this.#waiting;
    this.#waiting = new Set();
    for (const stream of waiting) stream.resumeSending();
  }

  #onMessage(data: Buffer, isBinary: boolean): void {
    if (!isBinary) {
      const message = parseControl(data.toString('utf8'));
      if (message !== null) this.#options.onControl?.(message);
      return;
    }
    const frames = splitMessage(data);
    if (frames === null) {
      this.close(1002, 'malformed batch');
      return;
    }
    for (const frame of frames) {
      if (this.#closed) return;
      this.#onFrame(frame);
    }
  }

  #onFrame(data: Buffer): void {
    const frame = decodeFrame(data);
    if (frame === null) {
      this.close(1002, 'malformed frame');
      return;
    }
    const stream = this.#streams.get(frame.streamId);
    switch (frame.type) {
      case FrameType.OPEN: {
        const { onStream, onSocketStream } = this.#options;
        if (stream !== undefined || (onStream === undefined && onSocketStream === undefined) || frame.streamId === 0) {
          this.#send(encodeFrame(FrameType.RESET, frame.streamId, Buffer.from('refused')));
          return;
        }
        if (onSocketStream !== undefined) {
          const { socket, options } = onSocketStream();
          const bridge = new SocketBridge(frame.streamId, this, this.#window, socket, options ?? {});
          this.#streams.set(frame.streamId, bridge);
          bridge.start();
          return;
        }
        const opened = new TunnelStream(frame.streamId, this, this.#window, true);
        this.#streams.set(frame.streamId, opened);
        onStream?.(opened);
        return;
      }
      // Frames for a stream we already forgot are the peer's in-flight traffic: drop them.
      case FrameType.DATA:
        stream?.receiveData(frame.payload);
        return;
      case FrameType.END:
        stream?.receiveEnd();
        return;
      case FrameType.RESET:
        stream?.receiveReset(frame.payload.toString('utf8') || 'reset by peer');
        return;
      case FrameType.WINDOW:
        stream?.receiveWindow(readCredit(frame));
        return;
    }
  }

  #onClose(code: number, reason: string): void {
    this.#destroyAll(reason || 'tunnel closed');
    this.#options.onClose?.(code, reason);
  }

  #destroyAll(reason: string): void {
    if (this.#torn) return;
    this.#torn = true;
    this.#closed = true;
    for (const stream of [...this.#streams.values()]) stream.receiveReset(reason);
    this.#streams.clear();
    this.#waiting.clear();
  }
}

interface PendingWrite {
  readonly chunk: Buffer;
  offset: number;
  readonly callback: (error?: Error | null) => void;
}

/**
 * One byte pipe inside a tunnel (the server's end stands in for a TCP connection to the local app).
 * Writing sends DATA within the peer's window (the write callback waits for credit, so
 * `pipe`/`pipeline` propagate back-pressure to the producer); reading consumes DATA and returns
 * credit as bytes leave the internal queue. `end()` sends END; `destroy()` before both sides ended
 * sends RESET. Errors are {@link StreamResetError}s.
 *
 * It also has the bits of the `net.Socket` surface that Node's HTTP client and Agent use
 * (`setTimeout` with a real idle timer, and `setNoDelay`, `setKeepAlive`, `ref`, `unref` as
 * no-ops), so it can be handed out by an Agent's `createConnection`.
 */
export class TunnelStream extends Duplex implements StreamEndpoint {
  readonly id: number;
  readonly #mux: Mux;
  readonly #window: number;
  /** Bytes we may still send before the peer grants more. */
  #sendWindow: number;
  /** Bytes the peer may still send before we grant more. */
  #recvWindow: number;
  /** Bytes consumed (handed to the reader) but not yet granted back. */
  #unacked = 0;
  readonly #recvQueue: Buffer[] = [];
  #wantRead = false;
  #recvEnded = false;
  #sentEnd = false;
  #peerReset = false;
  #pending: PendingWrite | null = null;
  #resetReason: string | undefined;
  #bytesSent = 0;
  #bytesReceived = 0;
  /** Idle timeout (`setTimeout`), in ms; 0 when off. */
  #timeoutMs = 0;
  #timer: NodeJS.Timeout | undefined;
  #timerDelay = 0;
  /** Bumped on every read and write; the idle timer fires only if it did not move for a period. */
  #activity = 0;
  #activitySeen = 0;

  constructor(id: number, mux: Mux, window: number, halfOpen: boolean) {
    // Small internal buffers: the window is the real buffer, these only smooth the pipe.
    super({ allowHalfOpen: halfOpen, readableHighWaterMark: 64 * 1024, writableHighWaterMark: 64 * 1024 });
    this.id = id;
    this.#mux = mux;
    this.#window = window;
    this.#sendWindow = window;
    this.#recvWindow = window;
    // Users watch 'close' and `resetReason`; without a listener a peer's RESET would crash the process.
    this.on('error', () => {});
  }

  /** Why the peer reset the stream, once it did (undefined when it ended or we destroyed it). */
  get resetReason(): string | undefined {
    return this.#resetReason;
  }

  /** Bytes we may send right now without more credit. */
  get sendWindow(): number {
    return this.#sendWindow;
  }

  /** Bytes received but not yet handed to the reader (never above the window). */
  get queuedBytes(): number {
    return this.#window - this.#recvWindow - this.#unacked;
  }

  get bytesSent(): number {
    return this.#bytesSent;
  }

  get bytesReceived(): number {
    return this.#bytesReceived;
  }

  // ---- the net.Socket surface used by Node's HTTP client and Agent --------------------------

  /** The idle timeout in ms (0: none), as `net.Socket#timeout`; the Agent reads it. */
  get timeout(): number {
    return this.#timeoutMs;
  }

  /** Emits 'timeout' once the stream saw no reads or writes for `ms` (0 turns it off), like a socket. */
  setTimeout(ms: number, callback?: () => void): this {
    if (callback !== undefined) {
      if (ms === 0) this.removeListener('timeout', callback);
      else this.once('timeout', callback);
    }
    this.#timeoutMs = ms;
    if (ms === 0 || this.destroyed) return this; // a pending timer sees 0 and stops
    // The HTTP client switches the timeout off and on around every request on a kept-alive
    // socket: restart the same timer object rather than make a new one each time.
    if (this.#timer !== undefined && this.#timerDelay === ms) {
      this.#activitySeen = this.#activity;
      this.#timer.refresh();
    } else {
      clearTimeout(this.#timer);
      this.#armTimer(ms);
    }
    return this;
  }

  /** No-op: small frames are already batched per event-loop turn by the mux. */
  setNoDelay(_noDelay?: boolean): this {
    return this;
  }

  /** No-op: the tunnel's own heartbeat watches the link. */
  setKeepAlive(_enable?: boolean, _initialDelay?: number): this {
    return this;
  }

  /** No-op: a stream holds no handle of its own that could keep the process alive. */
  ref(): this {
    return this;
  }

  /** No-op, see {@link ref}. */
  unref(): this {
    return this;
  }

  /** There is no socket address behind a stream; `net.Socket` reports undefined when unknown too. */
  get remoteAddress(): string | undefined {
    return undefined;
  }

  /** Never in the middle of a connect: a stream is usable the moment it is opened. */
  get connecting(): boolean {
    return false;
  }

  #armTimer(delay: number): void {
    this.#activitySeen = this.#activity;
    this.#timerDelay = delay;
    this.#timer = setTimeout(() => this.#onTimer(), delay);
    this.#timer.unref();
  }

  #onTimer(): void {
    this.#timer = undefined;
    if (this.destroyed || this.#timeoutMs === 0) return;
    if (this.#activity !== this.#activitySeen) {
      this.#armTimer(this.#timeoutMs);
      return;
    }
    this.emit('timeout');
  }

  // ---- Duplex ---------------------------------------------------------------------------------

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#activity++;
    this.#pending = { chunk, offset: 0, callback };
    this.#pump();
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#sentEnd = true;
    this.#mux.sendFrame(encodeFrame(FrameType.END, this.id));
    callback();
  }

  override _read(): void {
    this.#wantRead = true;
    this.#drain();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const complete = this.#sentEnd && this.#recvEnded;
    if (!complete && !this.#peerReset) {
      const reason = error instanceof StreamResetError ? error.reason : error?.message ?? 'cancelled';
      this.#mux.sendFrame(encodeFrame(FrameType.RESET, this.id, Buffer.from(reason.slice(0, 200), 'utf8')));
    }
    this.#pending = null;
    this.#recvQueue.length = 0;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#mux.forget(this);
    callback(error);
  }

  /** @internal The mux drained: try sending again. */
  resumeSending(): void {
    this.#pump();
  }

  /** @internal */
  receiveData(payload: Buffer): void {
    if (this.destroyed || this.#recvEnded) return;
    if (payload.length > this.#recvWindow) {
      this.destroy(new StreamResetError('flow control violated'));
      return;
    }
    this.#recvWindow -= payload.length;
    this.#bytesReceived += payload.length;
    this.#activity++;
    this.#recvQueue.push(payload);
    this.#drain();
  }

  /** @internal */
  receiveEnd(): void {
    if (this.#recvEnded) return;
    this.#recvEnded = true;
    this.#drain();
  }

  /** @internal */
  receiveWindow(credit: number): void {
    this.#sendWindow += credit;
    this.#pump();
  }

  /** @internal The peer gave up on the stream: it is dead both ways, whatever was queued is dropped. */
  receiveReset(reason: string): void {
    if (this.destroyed) return;
    this.#peerReset = true;
    this.#resetReason = reason;
    this.destroy(new StreamResetError(reason));
  }

  #pump(): void {
    const pending = this.#pending;
    if (pending === null || this.destroyed) return;
    while (pending.offset < pending.chunk.length) {
      if (this.#sendWindow <= 0 || this.#mux.congested(this)) return;
      const size = Math.min(this.#sendWindow, MAX_DATA_PAYLOAD, pending.chunk.length - pending.offset);
      this.#mux.sendData(this.id, pending.chunk.subarray(pending.offset, pending.offset + size));
      pending.offset += size;
      this.#sendWindow -= size;
      this.#bytesSent += size;
    }
    this.#pending = null;
    pending.callback();
  }

  #drain(): void {
    while (this.#wantRead && this.#recvQueue.length > 0) {
      const chunk = this.#recvQueue.shift() as Buffer;
      this.#credit(chunk.length);
      this.#wantRead = this.push(chunk);
    }
    if (this.#recvQueue.length === 0 && this.#recvEnded && !this.readableEnded && this.#wantRead) {
      this.#wantRead = false;
      this.push(null);
    }
  }

  /** Grants credit in batches of a quarter window: fewer frames, and never a stall: unacked
   * bytes stay under a quarter window, so the sender always has credit once the reader caught up. */
  #credit(consumed: number): void {
    this.#unacked += consumed;
    if (this.#unacked < this.#window / 4) return;
    this.#recvWindow += this.#unacked;
    this.#mux.sendFrame(encodeWindow(this.id, this.#unacked));
    this.#unacked = 0;
  }
}

function truncateUtf8(text: string, maxBytes: number): string {
  let out = text;
  while (Buffer.byteLength(out, 'utf8') > maxBytes) out = out.slice(0, -1);
  return out;
}

/**
 * Joins a socket and a tunnel stream into one pipe (the client's connection to the local app, or a
 * visitor's upgraded socket). A clean end travels as END in either direction; an error or abrupt
 * close of the socket destroys the stream, which frees it at once. When the stream is gone,
 * `onStreamClose` decides what the socket gets (default: destroyed unless the stream ended cleanly).
 */
export function joinSocket(
  socket: Duplex,
  stream: TunnelStream,
  options: { failureReason?: string; onStreamClose?: () => void } = {},
): void {
  socket.pipe(stream);
  stream.pipe(socket);
  socket.on('error', () => stream.destroy(new StreamResetError(options.failureReason ?? 'connection failed')));
  socket.once('close', () => {
    // A socket that ended cleanly lets its last bytes reach the peer before the stream goes.
    if (stream.writableEnded && !stream.writableFinished) stream.once('finish', () => stream.destroy());
    else stream.destroy();
  });
  stream.once('close', () => {
    if (options.onStreamClose !== undefined) {
      socket.unpipe(stream);
      options.onStreamClose();
    } else if (!stream.readableEnded) {
      socket.destroy();
    }
  });
}
