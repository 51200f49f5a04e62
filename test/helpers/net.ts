// Small socket helpers for tests and benchmarks (loopback only).
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago (for servers that must be restarted on the same port). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
