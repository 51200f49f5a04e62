// The WebSocket relay of `db connect` over real loopback sockets: bytes arrive whole and in order through reused read buffers, a reader that stops holds the source back, and either end closes the other.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket, { WebSocketServer } from 'ws';
import { RelayReads, relayWebSocket } from '../../src/core/ws-relay.js';

/** A source that writes `chunks` numbered 64 KiB blocks as fast as its socket takes them, counting what it handed over. */
function source(chunks: number): { server: net.Server; written: () => number; sha256: string } {
  const blocks = Array.from({ length: 16 }, (_, i) => Buffer.alloc(65536, i + 1));
  const hash = createHash('sha256');
  for (let i = 0; i < chunks; i += 1) hash.update(blocks[i % 16] as Buffer);
  let written = 0;
  const server = net.createServer((socket) => {
    let i = 0;
    const pump = (): void => {
      while (i < chunks) {
        const block = blocks[i % 16] as Buffer;
        i += 1;
        written += block.length;
        if (!socket.write(block)) return void socket.once('drain', pump);
      }
      socket.end();
    };
    pump();
  });
  return { server, written: () => written, sha256: hash.digest('hex') };
}

let wss: WebSocketServer;
let src: ReturnType<typeof source>;
const CHUNKS = 640; // 40 MiB

before(async () => {
  src = source(CHUNKS);
  await new Promise<void>((resolve) => src.server.listen(0, '127.0.0.1', resolve));
  const srcPort = (src.server.address() as net.AddressInfo).port;
  wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  wss.on('connection', (ws) => {
    const reads = new RelayReads();
    const tcp = net.connect({ host: '127.0.0.1', port: srcPort, onread: reads.onread });
    relayWebSocket(ws, tcp, () => tcp.destroy(), reads);
  });
});

after(async () => {
  for (const client of wss.clients) client.terminate();
  await new Promise((resolve) => wss.close(resolve));
  await new Promise((resolve) => src.server.close(resolve));
});

function dial(): WebSocket {
  return new WebSocket(`ws://127.0.0.1:${(wss.address() as net.AddressInfo).port}/`, { perMessageDeflate: false });
}

test('a reader that stops holds the source back; once it reads again every byte arrives in order, then the relay closes', async () => {
  const ws = dial();
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  ws.pause();
  await sleep(500);
  // 40 MiB offered; what left the source is bounded by the relay's 1 MiB, the sockets' buffers and one read.
  const heldBack = src.written();
  assert.ok(heldBack < 16 * 1024 * 1024, `the source wrote ${heldBack} bytes into a reader that does not read`);
  const hash = createHash('sha256');
  let bytes = 0;
  ws.on('message', (data: Buffer) => {
    bytes += data.length;
    hash.update(data);
  });
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  ws.resume();
  assert.equal(await closed, 1000);
  assert.equal(bytes, CHUNKS * 65536);
  assert.equal(hash.digest('hex'), src.sha256);
});
