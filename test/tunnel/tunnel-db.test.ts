// Tunnel names against the real server and database: a connect whose handshake fails after its name
// was claimed leaves no claim behind, so a deployment (or another user's tunnel) can take the name.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { CONNECT_PATH } from '../../src/tunnel/protocol.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Sends a tunnel upgrade with a valid key and WebSocket key but a malformed Sec-WebSocket-Protocol
 * (which only ws itself refuses, after the name is claimed); resolves with everything received. */
async function brokenHandshake(port: number, apiKey: string, subdomain: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.write(
    [
      `GET ${CONNECT_PATH}?subdomain=${subdomain} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      `Authorization: Bearer ${apiKey}`,
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
      'Sec-WebSocket-Protocol: "not a token"',
      '',
      '',
    ].join('\r\n'),
  );
  await Promise.race([once(socket, 'close'), sleep(10_000)]);
  socket.destroy();
  return Buffer.concat(chunks).toString('latin1');
}

describe('tunnel names in the database', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  test('a tunnel connect whose handshake fails after the claim holds no name: a deployment takes it at once', async () => {
    const attacker = await s.newUser('tunnel-attacker');
    const victim = await s.newUser('tunnel-victim');
    const subdomain = `held-${process.pid}`;
    const answer = await brokenHandshake(s.port, attacker.apiKey, subdomain);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    // The claim is given back as the connect ends: the name is free for another user at once.
    let created = await s.request('POST', '/api/v1/deployments', { token: victim.token, body: { name: 'taker', subdomain, repo_url: 'https://example.com/org/repo.git' } });
    for (let i = 0; i < 50 && created.status === 400 && created.json?.error === 'subdomain_taken'; i++) {
      // The release is one database statement after the answer; allow it a moment, never long.
      await sleep(20);
      created = await s.request('POST', '/api/v1/deployments', { token: victim.token, body: { name: 'taker', subdomain, repo_url: 'https://example.com/org/repo.git' } });
    }
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.subdomain, subdomain);
  });
});
