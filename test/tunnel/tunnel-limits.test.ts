// Tunnel limits: streams per tunnel, and what is counted before the work (broken handshakes, resets while claiming, silent and never-reading clients).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { CONNECT_PATH, MAX_OUTBOUND_BYTES } from '../../src/tunnel/protocol.js';
import { PLANES } from '../helpers/planes.js';
import { startLocalApp, type LocalApp } from '../helpers/tunnel-app.js';
import { startClient, startStack, waitFor } from '../helpers/tunnel-stack.js';
import { MiB, openFlood, peakRssGrowth, rawUpgrade, readUntilClose, visit, visitorAgent, visitStatus } from '../helpers/tunnel-visitors.js';

let app: LocalApp;
before(async () => {
  app = await startLocalApp();
});
after(async () => {
  visitorAgent.destroy();
  await app.close();
});

for (const plane of PLANES) describe(`tunnel: the streams limit (${plane} data plane)`, () => {
  it('answers 503 quickly once a tunnel carries its maximum of streams', async () => {
    const stack = await startStack({ plane, streamsPerTunnel: 2 });
    const client = startClient(stack, { apiKey: stack.authority.addKey('u').key, port: app.port, subdomain: 'busy' });
    await client.connected();
    const seen = app.slowSeen;
    let answered = 0;
    const slow = [visit(stack.port, 'busy', '/slow'), visit(stack.port, 'busy', '/slow')].map((v) => v.finally(() => answered++));
    await waitFor(() => stack.server.list('u')[0]?.streams === 2, 10_000, 'two streams');
    const refused = await visit(stack.port, 'busy', '/hello');
    assert.equal(refused.status, 503);
    // Refused while both streams were still held (without waiting for either), however long it took.
    assert.equal(answered, 0);
    // Released once the app holds both: released earlier, a request still on its way would wait forever.
    await waitFor(() => app.slowSeen - seen >= 2, 10_000, 'the app to receive both /slow');
    app.releaseSlow();
    for (const result of await Promise.all(slow)) assert.equal(result.body.toString(), 'slow done');
    await client.stop();
    await stack.close();
  });
});

for (const plane of PLANES) describe(`tunnel: limits counted before the work (${plane} data plane)`, () => {
  it('a handshake broken after authentication holds no name: another user takes it at once', async () => {
    const stack = await startStack({ plane });
    const attacker = stack.authority.addKey('attacker');
    const honest = stack.authority.addKey('honest');
    // No Sec-WebSocket-Key: refused before the key is even looked up, nothing claimed.
    const early = await rawUpgrade(stack.port, attacker.key, 'contested', ['Sec-WebSocket-Version: 13']);
    assert.match(await readUntilClose(early, 5000), /^HTTP\/1\.1 400 /);
    assert.equal(stack.authority.claimCalls, 0);
    // A handshake only ws itself refuses (a malformed Sec-WebSocket-Protocol), after the claim.
    const socket = await rawUpgrade(stack.port, attacker.key, 'contested', [
      'Sec-WebSocket-Version: 13',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
      'Sec-WebSocket-Protocol: "not a token"',
    ]);
    assert.match(await readUntilClose(socket, 5000), /^HTTP\/1\.1 400 /);
    assert.equal(stack.authority.claimCalls, 1, 'the name was claimed before the handshake');
    await waitFor(() => stack.authority.releases >= 1, 2000, 'claim released');
    const client = startClient(stack, { apiKey: honest.key, port: app.port, subdomain: 'contested' });
    assert.equal((await client.connected()).subdomain, 'contested');
    assert.equal((await visit(stack.port, 'contested', '/hello')).status, 200);
    await client.stop();
    await stack.close();
  });

  it('a connect reset while its name is being claimed holds no name', async () => {
    const stack = await startStack({ plane });
    const attacker = stack.authority.addKey('attacker');
    const honest = stack.authority.addKey('honest');
    let open = (): void => {};
    stack.authority.claimGate = new Promise<void>((resolve) => (open = resolve));
    const socket = await rawUpgrade(stack.port, attacker.key, 'aborted');
    await waitFor(() => stack.authority.claimCalls === 1, 2000, 'claim started');
    socket.resetAndDestroy();
    await waitFor(() => stack.upgrades[0]?.destroyed === true || stack.upgrades[0]?.readable === false, 2000, 'server saw the reset');
    stack.authority.claimGate = undefined;
    open();
    await waitFor(() => stack.authority.releases >= 1, 2000, 'claim released');
    assert.equal(stack.authority.claims.has('aborted'), false);
    const client = startClient(stack, { apiKey: honest.key, port: app.port, subdomain: 'aborted' });
    assert.equal((await client.connected()).subdomain, 'aborted');
    await client.stop();
    await stack.close();
  });

  it('a client that never completes the handshake (never answers a ping) loses its name within a heartbeat, with no grace', async () => {
    const stack = await startStack({ plane, heartbeatMs: 200, graceMs: 60_000 });
    const attacker = stack.authority.addKey('attacker');
    const honest = stack.authority.addKey('honest');
    // A raw socket: it gets the 101, READY and a ping, and answers nothing.
    const socket = await rawUpgrade(stack.port, attacker.key, 'silent');
    socket.pause();
    await waitFor(() => stack.table.get('silent') !== undefined, 2000, 'tunnel attached');
    await waitFor(() => stack.table.get('silent') === undefined && !stack.authority.claims.has('silent'), 3000, 'name released');
    const client = startClient(stack, { apiKey: honest.key, port: app.port, subdomain: 'silent' });
    assert.equal((await client.connected()).subdomain, 'silent');
    await client.stop();
    socket.destroy();
    await stack.close();
  });

  it('liveness needs answered pings: a client that keeps sending but stopped reading is dropped', async () => {
    const stack = await startStack({ plane, heartbeatMs: 150, graceMs: 60_000 });
    const { key } = stack.authority.addKey('talker');
    const ws = new WebSocket(`ws://127.0.0.1:${stack.port}${CONNECT_PATH}?subdomain=talker`, { headers: { authorization: `Bearer ${key}` }, perMessageDeflate: false });
    ws.on('error', () => {});
    await once(ws, 'message'); // READY (the first ping was answered by ws's automatic pong)
    await waitFor(() => stack.table.get('talker')?.state === 'connected', 2000, 'connected');
    const socket = (ws as unknown as { _socket: Socket })._socket;
    socket.pause();
    // Keeps talking: WINDOW frames, unsolicited pongs, text. None of it answers a ping.
    const window = Buffer.from([6, 0, 0, 0, 9, 0, 0, 0, 1]);
    const chatter = setInterval(() => {
      ws.send(window);
      ws.pong(Buffer.from('not-the-nonce'));
      ws.send('{"type":"noise"}');
    }, 20);
    try {
      await waitFor(() => stack.table.get('talker')?.state !== 'connected', 3000, 'the silent reader dropped');
      // It had answered pings before: the usual grace period holds the name for its owner.
      assert.equal(stack.table.get('talker')?.state, 'disconnected');
    } finally {
      clearInterval(chatter);
      ws.terminate();
    }
    await stack.close();
  });

  it('a client that never reads is disconnected before the server queues more than the cap for it, and its name is freed', async () => {
    const stack = await startStack({ plane, heartbeatMs: 60_000, graceMs: 60_000 });
    const attacker = stack.authority.addKey('attacker');
    const bystander = stack.authority.addKey('bystander');
    const other = startClient(stack, { apiKey: bystander.key, port: app.port, subdomain: 'bystander' });
    await other.connected();

    const ws = new WebSocket(`ws://127.0.0.1:${stack.port}${CONNECT_PATH}?subdomain=sink`, { headers: { authorization: `Bearer ${attacker.key}` }, perMessageDeflate: false });
    ws.on('error', () => {});
    await once(ws, 'message'); // READY; the first ping was answered: a proven client
    await waitFor(() => stack.table.get('sink')?.state === 'connected', 2000, 'connected');
    // The server side of this tunnel's TCP connection: measure what the server queues on it after
    // every write (the bytes userland holds for the client; the kernel's buffers are the kernel's).
    const serverSocket = stack.upgrades.at(-1) as Socket;
    let peakQueued = 0;
    const write = serverSocket.write.bind(serverSocket) as (...args: unknown[]) => boolean;
    (serverSocket as unknown as { write: (...args: unknown[]) => boolean }).write = (...args: unknown[]) => {
      const result = write(...args);
      peakQueued = Math.max(peakQueued, serverSocket.writableLength);
      return result;
    };
    (ws as unknown as { _socket: Socket })._socket.pause();

    let flooded = 0;
    let statuses: Array<number | 'closed' | 'timeout'> = [];
    const rss = await peakRssGrowth(async () => {
      // Visitors hammer its name (OPEN, request heads, aborts → RESETs) while it floods OPENs, each
      // answered with a RESET it never reads.
      const visitors = Array.from({ length: 100 }, () => visitStatus(stack.port, 'sink', '/hello', 30_000));
      const aborts = Array.from({ length: 100 }, () => visitStatus(stack.port, 'sink', `/abort/${'x'.repeat(900)}`, 20));
      let sent = 0;
      const deadline = Date.now() + 30_000;
      while (stack.table.get('sink') !== undefined && Date.now() < deadline && sent < 400 * MiB) {
        if (ws.readyState === WebSocket.OPEN) {
          ws.send(openFlood(100_000, sent));
          sent += 900_000;
        }
        await sleep(5);
      }
      flooded = sent;
      statuses = await Promise.all(visitors);
      await Promise.all(aborts);
    });
    process.stdout.write(
      `# never-reading client: ${(flooded / MiB).toFixed(0)} MiB of OPENs sent, test process RSS growth ${(rss / MiB).toFixed(1)} MiB, ` +
        `peak queued by the server ${peakQueued} bytes (cap ${MAX_OUTBOUND_BYTES})\n`,
    );
    assert.equal(stack.table.get('sink'), undefined, `still connected after ${flooded} bytes of OPENs`);
    for (const status of statuses) assert.ok(status === 502 || status === 503 || status === 404 || status === 'closed', `visitor got ${status}`);

    const logged = stack.logs.find((entry) => entry.msg.includes('stopped reading'));
    assert.ok(logged !== undefined, 'the overflow was logged');
    const peakOutbound = Number(logged.detail?.['peakOutboundBytes']);
    assert.ok(peakOutbound > MAX_OUTBOUND_BYTES / 2 && peakOutbound <= MAX_OUTBOUND_BYTES, `peak ${peakOutbound}`);
    assert.ok(peakQueued <= MAX_OUTBOUND_BYTES, `the server queued ${peakQueued} bytes for the client`);
    await waitFor(() => !stack.authority.claims.has('sink'), 2000, 'name released');
    // Others are served throughout, and the freed name can be taken at once.
    assert.equal((await visit(stack.port, 'bystander', '/hello')).status, 200);
    const next = startClient(stack, { apiKey: bystander.key, port: app.port, subdomain: 'sink' });
    assert.equal((await next.connected()).subdomain, 'sink');
    ws.terminate();
    await Promise.all([other.stop(), next.stop()]);
    await stack.close();
  });
});
