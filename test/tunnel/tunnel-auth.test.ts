// Tunnel refusals and ownership: unknown keys and session tokens, HTTP refusals before the handshake, names held by others, --force, tunnels per key, deleted keys.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { CONNECT_PATH } from '../../src/tunnel/protocol.js';
import { PLANES } from '../helpers/planes.js';
import { startLocalApp, type LocalApp } from '../helpers/tunnel-app.js';
import { startClient, startStack, waitFor, type Stack } from '../helpers/tunnel-stack.js';
import { visit, visitorAgent } from '../helpers/tunnel-visitors.js';

let app: LocalApp;
before(async () => {
  app = await startLocalApp();
});
after(async () => {
  visitorAgent.destroy();
  await app.close();
});

for (const plane of PLANES) describe(`tunnel: refusals and ownership (${plane} data plane)`, () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ plane, tunnelsPerKey: 2 });
  });
  after(() => stack.close());

  it('refuses an unknown key once, without retrying', async () => {
    const client = startClient(stack, { apiKey: 'slw_k1_notarealkeynotarealkeynotarealkey', port: app.port });
    const { error } = await client.result;
    assert.equal(error?.code, 'unauthorized');
    assert.match(error?.message ?? '', /invalid or has been deleted/);
    const calls = stack.authority.authCalls;
    await sleep(400);
    assert.equal(stack.authority.authCalls, calls);
    assert.equal(client.events.filter((e) => e.type === 'disconnected').length, 0);
  });

  it('refuses a session token (not an API key) without looking it up', async () => {
    const calls = stack.authority.authCalls;
    const client = startClient(stack, { apiKey: 'sess_0123456789abcdef', port: app.port });
    const { error } = await client.result;
    assert.equal(error?.code, 'unauthorized');
    assert.equal(stack.authority.authCalls, calls);
  });

  it('answers refusals as HTTP errors with a JSON body, before any handshake', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${stack.port}${CONNECT_PATH}`, { headers: { authorization: 'Bearer nope' } });
    const [, res] = (await once(ws, 'unexpected-response')) as [unknown, IncomingMessage];
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    assert.equal(res.statusCode, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.deepEqual(Object.keys(JSON.parse(Buffer.concat(chunks).toString()) as object), ['error', 'message']);
    ws.on('error', () => {});
    ws.terminate();
  });

  it('refuses a name held by another user or a deployment, or a reserved/invalid one', async () => {
    const a = stack.authority.addKey('user-a');
    const b = stack.authority.addKey('user-b');
    const holder = startClient(stack, { apiKey: a.key, port: app.port, subdomain: 'shared' });
    await holder.connected();
    const thief = startClient(stack, { apiKey: b.key, port: app.port, subdomain: 'shared' });
    const { error } = await thief.result;
    assert.equal(error?.code, 'subdomain_taken');
    assert.match(error?.message ?? '', /shared/);

    stack.authority.deployments.add('deployed');
    assert.equal((await startClient(stack, { apiKey: b.key, port: app.port, subdomain: 'deployed' }).result).error?.code, 'subdomain_taken');
    assert.equal((await startClient(stack, { apiKey: b.key, port: app.port, subdomain: 'admin' }).result).error?.code, 'validation_error');
    assert.equal((await startClient(stack, { apiKey: b.key, port: app.port, subdomain: '-bad-' }).result).error?.code, 'validation_error');
    // The holder was never disturbed.
    assert.equal((await visit(stack.port, 'shared', '/hello')).status, 200);
    await holder.stop();
  });

  it('lets the same user take the name back: after a drop, and over a live connection', async () => {
    const a1 = stack.authority.addKey('user-c');
    const a2 = stack.authority.addKey('user-c');
    const other = stack.authority.addKey('user-d');
    const first = startClient(stack, { apiKey: a1.key, port: app.port, subdomain: 'mine' });
    await first.connected();
    await first.stop();
    await waitFor(() => stack.table.get('mine')?.state === 'disconnected', 2000, 'disconnected');
    // Held for the owner during the grace period: another user cannot have it.
    assert.equal((await startClient(stack, { apiKey: other.key, port: app.port, subdomain: 'mine' }).result).error?.code, 'subdomain_taken');
    const second = startClient(stack, { apiKey: a1.key, port: app.port, subdomain: 'mine' });
    await second.connected();
    assert.equal((await visit(stack.port, 'mine', '/hello')).status, 200);
    // A second tunnel of the same user is refused while the first is live, naming --force ...
    const refused = (await startClient(stack, { apiKey: a2.key, port: app.port, subdomain: 'mine' }).result).error;
    assert.equal(refused?.code, 'subdomain_taken');
    assert.match(refused?.message ?? '', /already have a live tunnel on "mine".*--force/);
    // ... and with it replaces the live one, which stops for good.
    const third = startClient(stack, { apiKey: a2.key, port: app.port, subdomain: 'mine', force: true });
    await third.connected();
    assert.equal((await second.result).error?.code, 'tunnel_replaced');
    assert.equal((await visit(stack.port, 'mine', '/hello')).status, 200);
    assert.equal(stack.server.list('user-c').length, 1);
    await third.stop();
  });

  it('limits live tunnels per key', async () => {
    const k = stack.authority.addKey('user-e');
    const one = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'one' });
    const two = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'two' });
    await Promise.all([one.connected(), two.connected()]);
    const three = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'three' });
    const { error } = await three.result;
    assert.equal(error?.code, 'rate_limited');
    await Promise.all([one.stop(), two.stop()]);
  });

  it('closes the tunnels of a deleted key within a few seconds, for good', async () => {
    const k = stack.authority.addKey('user-f');
    const client = startClient(stack, { apiKey: k.key, port: app.port, subdomain: 'revoked' });
    await client.connected();
    const started = Date.now();
    stack.authority.keys.delete(k.key);
    stack.server.closeForKey(k.owner.apiKeyId);
    const { error } = await client.result;
    assert.ok(Date.now() - started < 3000);
    assert.equal(error?.code, 'unauthorized');
    assert.equal(stack.table.get('revoked'), undefined);
    assert.equal(stack.authority.claims.has('revoked'), false);
    assert.equal((await visit(stack.port, 'revoked', '/')).status, 404);
  });
});
