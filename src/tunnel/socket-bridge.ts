// A tunnel stream joined straight to a socket: the fast path of both ends of a tunnel (see mux.ts).
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { FrameType, MAX_DATA_PAYLOAD, encodeFrame, encodeWindow } from './protocol.js';

/** What a bridge needs of its mux (mux.ts): frames out, flow control of the WebSocket, and leaving. */
export interface BridgeMux {
  /** `owned`: the bytes are never changed or reused after this call, so they may leave without a copy. */
  sendData(id: number, chunk: Buffer, owned?: boolean): void;
  sendFrame(frame: Buffer): void;
  /** True while DATA must wait for the WebSocket to drain (the stream is then told by resumeSending). */
  congested(stream: StreamEndpoint): boolean;
  forget(stream: StreamEndpoint): void;
}

/** What the mux delivers a stream's frames to: a {@link TunnelStream} or a {@link SocketBridge}. */
export interface StreamEndpoint {
  readonly id: number;
  receiveData(payload: Buffer): void;
  receiveEnd(): void;
  receiveWindow(credit: number): void;
  receiveReset(reason: string): void;
  resumeSending(): void;
}

/**
 * What a bridge does to the bytes passing through it (the tunnel server's HTTP framing); bytes
 * pass unchanged without one. Either function may answer the socket itself (a refusal page) and
 * return null: the bridge then resets the stream and leaves the socket to finish what was written.
 */
export interface BridgeFilter {
  /** Bytes read from the socket → what to send to the peer. */
  fromSocket(chunk: Buffer): readonly Buffer[] | null;
  /** Bytes from the peer → what to write to the socket. */
  fromPeer(chunk: Buffer): readonly Buffer[] | null;
}

export interface BridgeOptions {
  readonly filter?: BridgeFilter;
  /** The RESET reason sent when the socket fails (default 'connection failed'). */
  failureReason?(err: Error): string;
  /** Called once when the bridge is done, however it ended. */
  onClose?(): void;
  /** The peer reset the stream: the handler ends or destroys the socket (default: destroyed). */
  onPeerReset?(reason: string): void;
  /** The peer ended its side: the handler ends the socket (default: `socket.end()`). */
  onPeerEnd?(): void;
  /**
   * For a socket opened with net's `onread` (every read lands in one reused buffer: no Buffer and
   * no 'data' event per read). The bridge then does not listen for 'data': it hands this function
   * the one to call with each read, a view of that buffer valid only until the next read of any
   * socket sharing it: the bridge copies what it must keep (bytes that wait for credit).
   */
  lentReads?(read: (bytes: Buffer) => void): void;
}

/**
 * Connects to `host:port` with every read landing in `buffer` (net's `onread`; the buffer may be
 * shared by many connections): the socket, and the {@link BridgeOptions.lentReads} option that hands
 * its bridge each read.
 */
export function connectLent(host: string, port: number, buffer: Buffer): { socket: Socket; lentReads: NonNullable<BridgeOptions['lentReads']> } {
  let read: ((bytes: Buffer) => void) | undefined;
  const onread = {
    buffer,
    callback: (size: number, into: Uint8Array): boolean => {
      read?.(Buffer.from(into.buffer, into.byteOffset, size));
      return true; // keep reading: the bridge pauses the socket itself when the stream has no credit
    },
  };
  const socket = connect({ host, port, noDelay: true, onread });
  return { socket, lentReads: (bridgeRead) => (read = bridgeRead) };
}

/**
 * A stream joined straight to a socket, without a Duplex in between: a socket read becomes DATA
 * (within the peer's window: the socket is paused while there is no credit or the WebSocket is
 * congested), and DATA is written to the socket, whose credit goes back to the peer only while the
 * socket keeps up (held back until 'drain' otherwise). So memory stays bounded by the window and
 * the socket's buffer, as with a piped {@link TunnelStream}, at a fraction of the cost per chunk.
 * A clean end of either side travels as END; an error or abrupt close as RESET.
 */
export class SocketBridge implements StreamEndpoint {
  readonly id: number;
  readonly #mux: BridgeMux;
  readonly #window: number;
  readonly #socket: Duplex;
  readonly #options: BridgeOptions;
  #sendWindow: number;
  #recvWindow: number;
  #unacked = 0;
  /** Bytes from the socket waiting for credit (the socket is paused meanwhile). */
  #held: Buffer[] = [];
  #paused = false;
  #waitingDrain = false;
  #socketEnded = false;
  #sentEnd = false;
  #recvEnded = false;
  #done = false;
  #resetReason: string | undefined;

  constructor(id: number, mux: BridgeMux, window: number, socket: Duplex, options: BridgeOptions) {
    this.id = id;
    this.#mux = mux;
    this.#window = window;
    this.#sendWindow = window;
    this.#recvWindow = window;
    this.#socket = socket;
    this.#options = options;
  }

  /** Why the peer reset the stream, once it did. */
  get resetReason(): string | undefined {
    return this.#resetReason;
  }

  /** True once the bridge ended (its stream is freed). */
  get done(): boolean {
    return this.#done;
  }

  /**
   * @internal Starts reading the socket (after the OPEN went out). A socket handed over paused (the
   * front door's) is resumed here: from now on only the bridge pauses and resumes it.
   */
  start(): void {
    const lentReads = this.#options.lentReads;
    for (const [event, listener] of this.#listeners) if (event !== 'data' || lentReads === undefined) this.#socket.on(event, listener);
    lentReads?.((bytes) => this.#onSocketData(bytes, true));
    if (lentReads === undefined && this.#socket.isPaused()) this.#socket.resume();
  }

  /**
   * Lets go of the socket without touching it (its stream is gone, or goes now with a RESET): the
   * caller serves it from here on (e.g. the HTTP server, once the tunnel dropped between requests).
   */
  detach(): void {
    const socket = this.#socket;
    for (const [event, listener] of this.#listeners) socket.off(event, listener);
    if (this.#paused) {
      this.#paused = false;
      socket.resume();
    }
    if (!this.#done && this.#resetReason === undefined) {
      this.#mux.sendFrame(encodeFrame(FrameType.RESET, this.id, Buffer.from('detached', 'utf8')));
    }
    this.#finish();
  }

  /** What the bridge listens to on its socket, added by start() and taken off by detach(). */
  readonly #listeners: ReadonlyArray<readonly [string, Parameters<Duplex['on']>[1]]> = [
    ['data', (chunk: Buffer) => this.#onSocketData(chunk)],
    [
      'end',
      () => {
        this.#socketEnded = true;
        this.#pumpOut();
      },
    ],
    ['error', (err: Error) => this.#fail(this.#options.failureReason?.(err) ?? 'connection failed')],
    [
      'close',
      () => {
        if (this.#done) return;
        if (this.#sentEnd && this.#recvEnded) this.#finish();
        else this.#fail('connection closed');
      },
    ],
    [
      'drain',
      () => {
        if (!this.#waitingDrain) return;
        this.#waitingDrain = false;
        this.#grant(true);
      },
    ],
  ];

  /** Ends the bridge at once: RESET to the peer, the socket destroyed. */
  destroy(reason = 'cancelled'): void {
    this.#fail(reason);
  }

  /** Sends bytes already read from the socket (before the bridge started reading it), as if just read. */
  feed(chunk: Buffer): void {
    if (chunk.length > 0) this.#onSocketData(chunk);
  }

  /** @internal */
  receiveData(payload: Buffer): void {
    if (this.#done || this.#recvEnded) return;
    if (payload.length > this.#recvWindow) {
      this.#fail('flow control violated');
      return;
    }
    this.#recvWindow -= payload.length;
    this.#unacked += payload.length;
    const filter = this.#options.filter;
    const socket = this.#socket;
    if (filter === undefined) {
      socket.write(payload);
    } else {
      const out = filter.fromPeer(payload);
      if (out === null) return this.#stop();
      for (const chunk of out) socket.write(chunk);
    }
    if (socket.writableNeedDrain) this.#waitingDrain = true;
    else this.#grant(false);
  }

  /** @internal */
  receiveEnd(): void {
    if (this.#done || this.#recvEnded) return;
    this.#recvEnded = true;
    if (this.#options.onPeerEnd !== undefined) this.#options.onPeerEnd();
    else this.#socket.end();
  }

  /** @internal */
  receiveWindow(credit: number): void {
    this.#sendWindow += credit;
    this.#pumpOut();
  }

  /** @internal The peer gave up on the stream. */
  receiveReset(reason: string): void {
    if (this.#done) return;
    this.#resetReason = reason;
    // The handler first (it may still answer the socket), then the bridge is done.
    if (this.#options.onPeerReset !== undefined) this.#options.onPeerReset(reason);
    else this.#socket.destroy();
    this.#finish();
  }

  /** @internal The WebSocket drained. */
  resumeSending(): void {
    this.#pumpOut();
  }

  /** A read from the socket; `lent`: a view of a shared buffer (see lentReads), copied before it is kept. */
  #onSocketData(chunk: Buffer, lent = false): void {
    if (this.#done) return;
    const filter = this.#options.filter;
    if (filter === undefined) {
      // The common case: room for the chunk, nothing held: no queue at all (a lent read is copied into a frame, a read of its own leaves as it is).
      if (this.#held.length === 0 && chunk.length <= this.#sendWindow && chunk.length <= MAX_DATA_PAYLOAD && !this.#mux.congested(this)) {
        this.#sendWindow -= chunk.length;
        this.#mux.sendData(this.id, chunk, !lent);
        return;
      }
      this.#held.push(lent ? Buffer.from(chunk) : chunk);
    } else {
      const out = filter.fromSocket(lent ? Buffer.from(chunk) : chunk);
      if (out === null) return this.#stop();
      for (const part of out) if (part.length > 0) this.#held.push(part);
    }
    this.#pumpOut();
  }

  #pumpOut(): void {
    if (this.#done) return;
    const held = this.#held;
    while (held.length > 0) {
      if (this.#sendWindow <= 0 || this.#mux.congested(this)) {
        // Checked against the socket too: a socket resumed behind the bridge's back would otherwise
        // go on reading into `held` without bound.
        if (!this.#paused || !this.#socket.isPaused()) {
          this.#paused = true;
          this.#socket.pause();
        }
        return;
      }
      const chunk = held[0] as Buffer;
      const size = Math.min(this.#sendWindow, MAX_DATA_PAYLOAD, chunk.length);
      // Held bytes are the bridge's own (a lent read was copied before it was held).
      this.#mux.sendData(this.id, size === chunk.length ? chunk : chunk.subarray(0, size), true);
      this.#sendWindow -= size;
      if (size === chunk.length) held.shift();
      else held[0] = chunk.subarray(size);
    }
    if (this.#paused) {
      this.#paused = false;
      this.#socket.resume();
    }
    if (this.#socketEnded && !this.#sentEnd) {
      this.#sentEnd = true;
      this.#mux.sendFrame(encodeFrame(FrameType.END, this.id));
      if (this.#recvEnded && this.#socket.destroyed) this.#finish();
    }
  }

  /** Grants the peer credit for the bytes written to the socket: batched, or all at once after a drain. */
  #grant(all: boolean): void {
    if (this.#unacked === 0 || (!all && this.#unacked < this.#window / 4)) return;
    this.#recvWindow += this.#unacked;
    this.#mux.sendFrame(encodeWindow(this.id, this.#unacked));
    this.#unacked = 0;
  }

  /** The filter answered the socket itself: the stream goes, the socket finishes on its own. */
  #stop(): void {
    if (this.#done) return;
    this.#mux.sendFrame(encodeFrame(FrameType.RESET, this.id, Buffer.from('refused by the edge', 'utf8')));
    this.#finish();
  }

  #fail(reason: string): void {
    if (this.#done) return;
    this.#mux.sendFrame(encodeFrame(FrameType.RESET, this.id, Buffer.from(reason.slice(0, 200), 'utf8')));
    this.#finish();
    this.#socket.destroy();
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    this.#held = [];
    // A socket this bridge paused (no credit, a congested link) and leaves open (a page written to
    // it, a refusal, a detach) reads again: its later bytes are dropped (the listener above sees the
    // bridge done) and its peer's end or reset is seen, so it closes. Left paused it would never
    // notice its peer leave: the connection, and a server's close() waiting for it, would stay
    // forever (a tunnel dropped under a paused upload left its visitor's connection so).
    if (this.#paused) {
      this.#paused = false;
      if (!this.#socket.destroyed) this.#socket.resume();
    }
    this.#mux.forget(this);
    this.#options.onClose?.();
  }
}
