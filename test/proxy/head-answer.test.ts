// Regression test written as the attack: an app that sends a body with its answer to HEAD (busybox httpd does) still gives the visitor its answer.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { AppProxy } from '../../src/proxy/app-proxy.js';
import { RoutingTable } from '../../src/proxy/routing-table.js';

const servers: (Server | TcpServer)[] = [];
const sockets = new Set<Socket>();
after(() => {
  for (const socket of sockets) socket.destroy();
  for (const server of servers) server.close();
});

async function listen(server: Server | TcpServer): Promise<number> {
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

test('HEAD to an app that answers with a body: the visitor gets the status and headers', async () => {
  // Keep-alive, like busybox httpd on a 200: Content-Length 3 and the 3 bytes, even for HEAD.
  const app = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    let seen = '';
    socket.on('data', (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      while (seen.includes('\r\n\r\n')) {
        seen = seen.slice(seen.indexOf('\r\n\r\n') + 4);
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 3\r\n\r\nhi\n');
      }
    });
  });
  const appPort = await listen(app);
  const table = new RoutingTable('apps.test');
  table.set('head', { kind: 'app', deploymentId: 'dep-head', state: 'live', upstreams: [{ host: '127.0.0.1', port: appPort }] });
  const proxy = new AppProxy({ table, publicProtocol: 'http' });
  const front = createServer((req, res) => {
    if (!proxy.handleRequest(req, res)) res.end('api');
  });
  const port = await listen(front);
  after(() => proxy.close());

  for (let i = 0; i < 3; i++) {
    const answer = await new Promise<{ status: number; type: string | undefined }>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'HEAD', path: '/', headers: { host: 'head.apps.test' }, agent: false, timeout: 5_000 }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'] }));
      });
      req.on('timeout', () => req.destroy(new Error('no answer within 5 s')));
      req.on('error', reject);
      req.end();
    });
    assert.deepEqual(answer, { status: 200, type: 'text/html' });
  }
});
