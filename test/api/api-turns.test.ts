// ApiTurns: API requests start one per event-loop turn, with I/O handled between them.
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { ApiTurns } from '../../src/api/api-turns.js';

/** Keeps the thread busy for `ms` (an API request's synchronous work). */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('ApiTurns', () => {
  test('I/O that arrives while a task runs is handled before the next task', async () => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    const [socket] = (await once(server, 'connection')) as [net.Socket];
    await once(client, 'connect');
    const order: string[] = [];
    const done = new Promise<void>((resolve) => socket.once('data', () => resolve(void order.push('io'))));
    const turns = new ApiTurns((err) => assert.fail(String(err)));
    turns.run(() => {
      order.push('api1');
      client.write('x'); // a visitor's request arriving while an API request is handled
      busy(20);
    });
    turns.run(() => (busy(20), order.push('api2')));
    turns.run(() => (busy(20), order.push('api3')));
    assert.equal(turns.waiting, 3);
    await done;
    await new Promise<void>((resolve) => turns.run(resolve));
    assert.deepEqual(order, ['api1', 'io', 'api2', 'api3']);
    assert.equal(turns.waiting, 0);
    client.destroy();
    socket.destroy();
    server.close();
  });

  test('a task that throws goes to onError; the next ones still run, in order', async () => {
    const errors: unknown[] = [];
    const ran: number[] = [];
    const turns = new ApiTurns((err) => errors.push(err));
    turns.run(() => ran.push(1));
    turns.run(() => {
      throw new Error('boom');
    });
    turns.run(() => ran.push(3));
    await new Promise<void>((resolve) => turns.run(resolve));
    assert.deepEqual(ran, [1, 3]);
    assert.equal((errors[0] as Error).message, 'boom');
  });
});
