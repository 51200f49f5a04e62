// The readiness knock: each engine's greeting read from real replies, and knock() over real loopback sockets (a listener that asks for a password, one that is starting up, none at all).
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { knock, postgresGreeting, redisGreeting } from '../../src/databases/greeting.js';

const credentials = { username: 'app', password: 's3cret', database: 'shop' };

/** A loopback server answering each connection with `reply(firstBytes)` once something arrives (null: it closes instead; undefined: it stays silent). */
async function server(reply: (received: Buffer) => Buffer | null | undefined): Promise<{ port: number; received: Buffer[]; close: () => Promise<void> }> {
  const received: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.once('data', (chunk: Buffer) => {
      received.push(chunk);
      const answer = reply(chunk);
      if (answer === null) socket.destroy();
      else if (answer !== undefined) socket.write(answer);
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  return {
    port,
    received,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        srv.close(() => resolve());
      }),
  };
}

const dialer = (port: number) => () => net.connect({ host: '127.0.0.1', port });

describe('postgres greeting', () => {
  it('sends a protocol 3.0 startup message naming the user and database, and no password', () => {
    const hello = postgresGreeting.hello(credentials);
    assert.equal(hello.readInt32BE(0), hello.length);
    assert.equal(hello.readInt32BE(4), 196608);
    assert.equal(hello.subarray(8).toString('utf8'), 'user\0app\0database\0shop\0\0');
    assert.equal(hello.includes(Buffer.from('s3cret')), false);
  });

  it('reads an authentication request as ready and an error as not yet', () => {
    // AuthenticationSASL as PostgreSQL 15 sends it for scram-sha-256.
    assert.equal(postgresGreeting.answer(Buffer.from('520000001700000000a53435241', 'hex')), 'ready');
    assert.equal(postgresGreeting.answer(Buffer.concat([Buffer.from('E'), Buffer.from('\0\0\0\x40SFATAL\0C57P03\0Mthe database system is starting up\0\0')])), 'not-yet');
    assert.equal(postgresGreeting.answer(Buffer.alloc(0)), 'more');
  });
});

describe('redis greeting', () => {
  it('logs in and pings in one write, the password as a bulk string', () => {
    assert.equal(redisGreeting.hello(credentials).toString(), '*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n*1\r\n$4\r\nPING\r\n');
  });

  it('is ready only when the login is taken and the ping answered', () => {
    assert.equal(redisGreeting.answer(Buffer.from('+OK\r\n+PONG\r\n')), 'ready');
    assert.equal(redisGreeting.answer(Buffer.from('+OK\r\n-LOADING Redis is loading the dataset in memory\r\n')), 'not-yet');
    assert.equal(redisGreeting.answer(Buffer.from('-WRONGPASS invalid username-password pair\r\n')), 'not-yet');
    assert.equal(redisGreeting.answer(Buffer.from('+OK\r\n')), 'more');
    assert.equal(redisGreeting.answer(Buffer.from('+O')), 'more');
  });
});

describe('knock over real sockets', () => {
  const servers: Array<{ close: () => Promise<void> }> = [];
  let asking: Awaited<ReturnType<typeof server>>;
  let starting: Awaited<ReturnType<typeof server>>;
  let closing: Awaited<ReturnType<typeof server>>;

  before(async () => {
    asking = await server(() => Buffer.from('520000000c00000005aabbccdd', 'hex'));
    starting = await server(() => Buffer.from('E\0\0\0\x08SFATAL\0', 'latin1'));
    closing = await server(() => null);
    servers.push(asking, starting, closing);
  });
  after(async () => {
    for (const s of servers) await s.close();
  });

  it('is true when the server asks for the password, having sent it the startup message', async () => {
    assert.equal(await knock(dialer(asking.port), postgresGreeting, credentials), true);
    assert.deepEqual(asking.received.at(-1), postgresGreeting.hello(credentials));
  });

  it('is false when the server answers it is starting up, or closes without a word', async () => {
    assert.equal(await knock(dialer(starting.port), postgresGreeting, credentials), false);
    assert.equal(await knock(dialer(closing.port), postgresGreeting, credentials), false);
  });

  it('is false at once when nothing listens', async () => {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const started = Date.now();
    assert.equal(await knock(dialer(port), postgresGreeting, credentials, 5000), false);
    assert.ok(Date.now() - started < 4000, 'a refused connection ends the knock, not its timeout');
  });

  it('is false when a listener never answers within the timeout', async () => {
    const silent = await server(() => undefined);
    servers.push(silent);
    assert.equal(await knock(dialer(silent.port), postgresGreeting, credentials, 200), false);
    assert.equal(silent.received.length, 1, 'the startup message arrived');
  });
});
