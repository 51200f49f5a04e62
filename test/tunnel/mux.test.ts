// Tests of the tunnel frame codec and the stream multiplexer over a real loopback WebSocket.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { Mux, StreamResetError, type MuxOptions, type TunnelStream } from '../../src/tunnel/mux.js';
import { connectLent } from '../../src/tunnel/socket-bridge.js';
import { FrameType, decodeFrame, encodeFrame, encodeWindow, parseControl, readCredit } from '../../src/tunnel/protocol.js';

describe('protocol', () => {
  it('round-trips frames', () => {
    const frame = decodeFrame(encodeFrame(FrameType.DATA, 0xfffffffe, Buffer.from('hello')));
    assert.deepEqual(frame && { type: frame.type, id: frame.streamId, payload: frame.payload.toString() }, {
      type: FrameType.DATA,
      id: 0xfffffffe,
      payload: 'hello',
    });
    const win = decodeFrame(encodeWindow(7, 123456));
    assert.ok(win);
    assert.equal(readCredit(win), 123456);
    const open = decodeFrame(encodeFrame(FrameType.OPEN, 1));
    assert.deepEqual(open && { type: open.type, id: open.streamId, length: open.payload.length }, { type: FrameType.OPEN, id: 1, length: 0 });
  });

  it('rejects malformed frames, and the JSON head frame of protocol 2', () => {
    assert.equal(decodeFrame(Buffer.from([1, 0, 0])), null);
    assert.equal(decodeFrame(encodeFrame(99 as FrameType, 1)), null);
    assert.equal(decodeFrame(encodeFrame(2 as FrameType, 1, Buffer.from('{"status":200,"headers":[]}'))), null);
    assert.equal(decodeFrame(encodeFrame(FrameType.WINDOW, 1, Buffer.alloc(2))), null);
  });

  it('parses request log batches, dropping malformed entries', () => {
    const text = JSON.stringify({ type: 'requests', entries: [['GET', '/a', 200, 3], ['GET', '/b'], 'x', ['POST', '/c', 499, 0]] });
    assert.deepEqual(parseControl(text), { type: 'requests', entries: [['GET', '/a', 200, 3], ['POST', '/c', 499, 0]] });
    assert.equal(parseControl('{"type":"requests"}'), null);
    assert.equal(parseControl('not json'), null);
  });
});

/** Two muxes joined by a real WebSocket on loopback: `opener` opens streams, `acceptor` receives them. */
async function muxPair(
  window: number,
  onStream: MuxOptions['onStream'],
  acceptorOptions: Pick<MuxOptions, 'onSocketStream'> = {},
): Promise<{ opener: Mux; acceptor: Mux; close(): Promise<void> }> {
  const server: Server = createServer();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const accepted = new Promise<WebSocket>((resolve) => {
    server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, resolve));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const client = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
  const acceptor = new Mux(client, { window, ...(onStream === undefined ? {} : { onStream }), ...acceptorOptions });
  await once(client, 'open');
  const opener = new Mux(await accepted, { window });
  return {
    opener,
    acceptor,
    async close() {
      opener.close();
      acceptor.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function sha256(chunks: Buffer[]): string {
  const hash = createHash('sha256');
  for (const chunk of chunks) hash.update(chunk);
  return hash.digest('hex');
}

/** Resolves on 'close' (events.once would reject on the 'error' a reset emits first). */
function closeOf(stream: TunnelStream): Promise<void> {
  return new Promise((resolve) => stream.once('close', () => resolve()));
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('mux', () => {
  const accepted: Array<{ stream: TunnelStream }> = [];
  let pair: Awaited<ReturnType<typeof muxPair>>;
  const WINDOW = 64 * 1024;

  before(async () => {
    pair = await muxPair(WINDOW, (stream) => {
      accepted.push({ stream });
    });
  });
  after(() => pair.close());

  const nextAccepted = async (): Promise<{ stream: TunnelStream }> => {
    const start = accepted.length;
    while (accepted.length === start) await sleep(5);
    return accepted[accepted.length - 1] as { stream: TunnelStream };
  };

  it('carries bytes both ways, intact', async () => {
    const stream = pair.opener.open();
    const closed = closeOf(stream);
    const remote = await nextAccepted();
    // The acceptor echoes whatever it reads.
    const echoed = pipeline(remote.stream, remote.stream);
    const body = randomBytes(3 * 1024 * 1024 + 17);
    stream.end(body);
    const received = await collect(stream);
    await echoed;
    assert.equal(sha256([received]), sha256([body]));
    await closed;
    await sleep(10);
    assert.equal(pair.opener.streamCount, 0);
    assert.equal(pair.acceptor.streamCount, 0);
  });

  it('never sends more than the window to a reader that does not read', async () => {
    const stream = pair.opener.open();
    const remote = await nextAccepted();
    const total = 4 * 1024 * 1024;
    const source = Readable.from(
      (function* () {
        for (let sent = 0; sent < total; sent += 16 * 1024) yield Buffer.alloc(16 * 1024, 7);
      })(),
    );
    const writing = pipeline(source, stream);
    await sleep(300);
    // The reader has not read: the peer holds at most one window, the sender stopped there too.
    assert.ok(remote.stream.bytesReceived <= WINDOW, `received ${remote.stream.bytesReceived}`);
    assert.ok(stream.bytesSent <= WINDOW, `sent ${stream.bytesSent}`);
    assert.equal(stream.sendWindow, WINDOW - stream.bytesSent);
    // Reading releases credit and the rest flows.
    let count = 0;
    await pipeline(
      remote.stream,
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          count += chunk.length;
          cb();
        },
      }),
    );
    await writing;
    assert.equal(count, total);
    remote.stream.end();
    stream.resume();
    await closeOf(stream);
  });

  it('a stalled stream does not block another stream', async () => {
    const stalled = pair.opener.open();
    const stalledRemote = await nextAccepted();
    const stalledWrite = stalled.write(Buffer.alloc(1024 * 1024, 1)); // far beyond the window
    assert.equal(stalledWrite, false);
    const fast = pair.opener.open();
    const fastRemote = await nextAccepted();
    const body = randomBytes(2 * 1024 * 1024);
    fast.end(body);
    const received = await collect(fastRemote.stream);
    assert.equal(sha256([received]), sha256([body]));
    assert.ok(stalledRemote.stream.bytesReceived <= WINDOW);
    stalled.destroy();
    fastRemote.stream.end();
    fast.resume();
    await closeOf(fast);
  });

  it('RESET frees the stream on both ends at once and errors the peer', async () => {
    const stream = pair.opener.open();
    const remote = await nextAccepted();
    stream.write(Buffer.alloc(1000));
    const closed = closeOf(remote.stream);
    let error: unknown;
    remote.stream.on('error', (err) => (error = err));
    stream.destroy();
    await closed;
    assert.ok(error instanceof StreamResetError);
    assert.equal(pair.opener.streamCount, 0);
    assert.equal(pair.acceptor.streamCount, 0);
  });

  it('a RESET after END still frees both ends at once', async () => {
    const stream = pair.opener.open();
    const closed = closeOf(stream);
    const remote = await nextAccepted();
    stream.end(Buffer.from('request'));
    remote.stream.write(Buffer.from('partial answer'));
    await sleep(20);
    stream.destroy();
    await Promise.all([closed, closeOf(remote.stream)]);
    assert.equal(pair.opener.streamCount, 0);
    assert.equal(pair.acceptor.streamCount, 0);
  });

  it('a stream opened without half-open ends itself once the peer ends, like a socket', async () => {
    const stream = pair.opener.open({ halfOpen: false });
    const closed = closeOf(stream);
    const remote = await nextAccepted();
    const remoteEnded = collect(remote.stream);
    remote.stream.end(Buffer.from('bye'));
    assert.equal((await collect(stream)).toString(), 'bye');
    await closed;
    assert.equal((await remoteEnded).length, 0);
    await sleep(10);
    assert.equal(pair.opener.streamCount, 0);
    assert.equal(pair.acceptor.streamCount, 0);
  });

  it('emits timeout after the idle period it was given, not while bytes flow', async () => {
    const stream = pair.opener.open();
    const remote = await nextAccepted();
    let timeouts = 0;
    stream.setTimeout(150, () => timeouts++);
    assert.equal(stream.timeout, 150);
    for (let i = 0; i < 6; i++) {
      remote.stream.write(Buffer.from('tick'));
      stream.read();
      await sleep(50);
    }
    assert.equal(timeouts, 0);
    await sleep(400);
    assert.equal(timeouts, 1);
    stream.setTimeout(0);
    stream.destroy();
  });

  it('closing the WebSocket destroys every stream', async () => {
    const local = await muxPair(WINDOW, () => {});
    const a = local.opener.open();
    const b = local.opener.open();
    const closes = [closeOf(a), closeOf(b)];
    local.acceptor.close(1001, 'bye');
    await Promise.all(closes);
    assert.equal(local.opener.streamCount, 0);
    await local.close();
  });
});

describe('socket bridge', () => {
  const WINDOW = 64 * 1024;

  /** A loopback TCP server whose connections `onConnection` serves; returns its port and a closer. */
  async function tcpServer(onConnection: (socket: Socket) => void): Promise<{ port: number; sockets: Socket[]; close(): Promise<void> }> {
    const sockets: Socket[] = [];
    const server = createTcpServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      onConnection(socket);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return {
      port: (server.address() as AddressInfo).port,
      sockets,
      close: async () => {
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  }

  it('joins a stream to a socket: bytes both ways intact, a clean end both ways frees the stream', async () => {
    const app = await tcpServer((socket) => socket.pipe(socket));
    const pair = await muxPair(WINDOW, undefined, { onSocketStream: () => ({ socket: connect(app.port, '127.0.0.1') }) });
    const stream = pair.opener.open();
    const closed = closeOf(stream);
    const body = randomBytes(3 * 1024 * 1024 + 5);
    stream.end(body);
    const received = await collect(stream);
    assert.equal(sha256([received]), sha256([body]));
    await closed;
    await sleep(20);
    assert.equal(pair.opener.streamCount, 0);
    assert.equal(pair.acceptor.streamCount, 0);
    await pair.close();
    await app.close();
  });

  it('a socket that stops reading stalls the sender within the window and its buffers; reading again lets the rest through', async () => {
    let received = 0;
    const app = await tcpServer((socket) => {
      socket.pause();
      socket.on('data', (chunk: Buffer) => (received += chunk.length));
    });
    const pair = await muxPair(WINDOW, undefined, { onSocketStream: () => ({ socket: connect(app.port, '127.0.0.1') }) });
    const stream = pair.opener.open();
    const total = 64 * 1024 * 1024;
    const writing = pipeline(
      Readable.from(
        (function* () {
          for (let sent = 0; sent < total; sent += 64 * 1024) yield Buffer.alloc(64 * 1024, 3);
        })(),
      ),
      stream,
    );
    // The sender stalls: what it has sent stops growing (read every 300 ms; a loaded machine takes longer to fill the buffers).
    let stalledAt = -1;
    const stallDeadline = Date.now() + 15_000;
    while (stream.bytesSent !== stalledAt && Date.now() < stallDeadline) {
      stalledAt = stream.bytesSent;
      await sleep(300);
    }
    // Only the window plus what the kernel and the bridge's socket buffer hold went out, and no more.
    assert.ok(stalledAt < 24 * 1024 * 1024, `sent ${stalledAt} of ${total} to an app that does not read`);
    assert.equal(stream.bytesSent, stalledAt, 'the sender kept sending to an app that does not read');
    for (const socket of app.sockets) socket.resume();
    await writing;
    const deadline = Date.now() + 10_000;
    while (received < total && Date.now() < deadline) await sleep(20);
    assert.equal(received, total);
    await pair.close();
    await app.close();
  });

  it('sockets reading into one shared buffer (onread) hand their reads over through lentReads: bodies of many windows arrive intact', async () => {
    // Each app connection sends far more than the window at once: reads wait for credit while the
    // other connection's reads overwrite the shared buffer.
    const bodies = [randomBytes(2 * 1024 * 1024 + 3), randomBytes(2 * 1024 * 1024 + 7)];
    let served = 0;
    const app = await tcpServer((socket) => socket.end(bodies[served++ % 2] as Buffer));
    const shared = Buffer.alloc(4096);
    const pair = await muxPair(WINDOW, undefined, {
      onSocketStream: () => {
        const { socket, lentReads } = connectLent('127.0.0.1', app.port, shared);
        return { socket, options: { lentReads } };
      },
    });
    const readAll = async (stream: TunnelStream): Promise<Buffer[]> => {
      stream.end();
      const received: Buffer[] = [];
      for await (const chunk of stream) {
        received.push(chunk as Buffer);
        if (received.length % 16 === 0) await sleep(1); // a slow reader: credit comes back late
      }
      return received;
    };
    const received = await Promise.all([readAll(pair.opener.open()), readAll(pair.opener.open())]);
    // The app answers connections in the order they arrive, which need not be the streams' order.
    assert.deepEqual(received.map((chunks) => sha256(chunks)).sort(), bodies.map((body) => sha256([body])).sort());
    await pair.close();
    await app.close();
  });

  it('a refused connect resets the stream with the reason the bridge gives', async () => {
    const app = await tcpServer(() => {});
    const closedPort = app.port;
    await app.close();
    const pair = await muxPair(WINDOW, undefined, {
      onSocketStream: () => ({
        socket: connect(closedPort, '127.0.0.1'),
        options: { failureReason: (err: NodeJS.ErrnoException) => `refused ${err.code ?? ''}` },
      }),
    });
    const stream = pair.opener.open();
    const closed = closeOf(stream);
    stream.write('hello');
    await closed;
    assert.equal(stream.resetReason, 'refused ECONNREFUSED');
    assert.equal(pair.acceptor.streamCount, 0);
    await pair.close();
  });

  it('a socket paused for credit and answered by the handler when the peer resets reads again: it closes once its visitor leaves', async () => {
    // The tunnel proxy's case: an upload paused (the app stopped taking it), then the tunnel drops;
    // the handler writes a 502 page and ends. The socket must still see its visitor go, or the
    // connection (and a server's close(), which waits for it) stays forever.
    const accepted: TunnelStream[] = [];
    const pair = await muxPair(WINDOW, (stream) => accepted.push(stream)); // never read: no credit comes back
    const fronts: Socket[] = [];
    const front = await tcpServer((socket) => {
      fronts.push(socket);
      pair.opener.bridge(socket, { onPeerReset: () => socket.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n') });
    });
    const visitor = connect(front.port, '127.0.0.1');
    visitor.on('error', () => {});
    const answer = once(visitor, 'data');
    visitor.write(Buffer.alloc(8 * 1024 * 1024, 1));
    const deadline = Date.now() + 10_000;
    while (!(fronts[0]?.isPaused() === true && accepted.length === 1) && Date.now() < deadline) await sleep(10);
    const socket = fronts[0] as Socket;
    assert.ok(socket.isPaused(), 'the bridge paused the socket once the window was used');
    accepted[0]?.destroy(new StreamResetError('tunnel dropped'));
    assert.match(String(await answer), /^HTTP\/1\.1 502/);
    visitor.destroy();
    const closeDeadline = Date.now() + 10_000;
    while (!socket.destroyed && Date.now() < closeDeadline) await sleep(10);
    assert.ok(socket.destroyed, 'the answered socket never noticed its visitor leave (still paused)');
    assert.equal(pair.opener.streamCount, 0);
    await pair.close();
    await front.close();
  });

  it("a visitor's reads leave as they are, never copied into a frame (an upload's garbage), and arrive intact", async () => {
    const received: Buffer[] = [];
    const pair = await muxPair(WINDOW, (stream) => {
      stream.on('data', (chunk: Buffer) => received.push(chunk));
    });
    // What the socket read (each read a buffer of its own), and what the server's WebSocket is handed to send.
    const reads = new Set<ArrayBufferLike>();
    let smallReadBytes = 0;
    let sentAsRead = 0;
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (this: WebSocket, data: unknown, ...rest: unknown[]) {
      if (Buffer.isBuffer(data) && reads.has(data.buffer)) sentAsRead += data.length;
      return (send as (...args: unknown[]) => void).call(this, data, ...rest);
    } as typeof send;
    const front = await tcpServer((socket) => {
      socket.on('data', (chunk: Buffer) => {
        reads.add(chunk.buffer);
        if (chunk.length < 16 * 1024) smallReadBytes += chunk.length;
      });
      pair.opener.bridge(socket);
    });
    try {
      const visitor = connect(front.port, '127.0.0.1');
      const body = randomBytes(4 * 1024 * 1024);
      // Not ended: a visitor's socket closing resets the stream, which drops bytes still queued.
      visitor.write(body);
      while (received.reduce((sum, chunk) => sum + chunk.length, 0) < body.length) await sleep(10);
      assert.equal(sha256(received), sha256([body]));
      // Only pieces too small to go alone are copied (into a batch of small frames): reads that small,
      // and the rest of a read cut at the end of a window.
      assert.ok(sentAsRead > body.length / 2, `${sentAsRead} of ${body.length} bytes sent without a copy (${smallReadBytes} in small reads)`);
      visitor.destroy();
    } finally {
      WebSocket.prototype.send = send;
      await pair.close();
      await front.close();
    }
  });

  it('the opening side: a visitor socket bridged to a stream, echoed by the peer; a RESET from the peer closes the socket', async () => {
    const accepted: TunnelStream[] = [];
    const pair = await muxPair(WINDOW, (stream) => {
      accepted.push(stream);
      if (accepted.length === 1) void pipeline(stream, stream).catch(() => {});
    });
    const bridges: Socket[] = [];
    const front = await tcpServer((socket) => {
      bridges.push(socket);
      pair.opener.bridge(socket);
    });
    // A visitor ending its side ends the connection (as Node's HTTP server treats it): it waits for the echo first.
    const visitor = connect(front.port, '127.0.0.1');
    const body = randomBytes(2 * 1024 * 1024);
    const chunks: Buffer[] = [];
    let echoedBytes = 0;
    visitor.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      echoedBytes += chunk.length;
      if (echoedBytes === body.length) visitor.end();
    });
    const visitorClosed = once(visitor, 'close');
    visitor.write(body);
    await visitorClosed;
    assert.equal(sha256(chunks), sha256([body]));

    const second = connect(front.port, '127.0.0.1');
    second.on('error', () => {});
    second.write('x');
    while (accepted.length < 2) await sleep(5);
    const closed = once(second, 'close');
    accepted[1]?.destroy(new StreamResetError('app gone'));
    await closed;
    await sleep(20);
    assert.equal(pair.opener.streamCount, 0);
    await pair.close();
    await front.close();
  });
});
