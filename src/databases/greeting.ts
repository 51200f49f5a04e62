// A database's first words on its port, read from the control plane: whether its final server takes logins yet, without an exec inside its container.
import type { Duplex } from 'node:stream';
import type { DatabaseCredentials } from './container-command.js';

/** What a reply read so far says: logins are taken, not yet (starting, loading), or more bytes are needed. */
export type GreetingVerdict = 'ready' | 'not-yet' | 'more';

/**
 * An engine's opening exchange: `hello` is written on connecting (empty when the server speaks
 * first), `answer` reads what came back. It must have no side effect on the server: no login is
 * completed and nothing the server counts against the caller's address.
 */
export interface Greeting {
  hello(credentials: DatabaseCredentials): Buffer;
  answer(reply: Buffer): GreetingVerdict;
}

/** Time one knock may take: a connection refused answers at once, a listening server within milliseconds. */
export const KNOCK_TIMEOUT_MS = 2000;

/**
 * Opens one connection with `dial`, says hello and reads the reply until `greeting` decides.
 * Resolves true when the server takes logins; false when it refused, is not ready, closed or took
 * too long. Never throws; the connection is closed either way.
 */
export function knock(dial: () => Duplex, greeting: Greeting, credentials: DatabaseCredentials, timeoutMs = KNOCK_TIMEOUT_MS): Promise<boolean> {
  return new Promise((resolve) => {
    let socket: Duplex;
    try {
      socket = dial();
    } catch {
      resolve(false);
      return;
    }
    let reply = Buffer.alloc(0);
    const done = (ready: boolean): void => {
      clearTimeout(timer);
      socket.removeAllListeners('data');
      socket.on('error', () => undefined);
      socket.destroy();
      resolve(ready);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('end', () => done(false));
    socket.on('data', (chunk: Buffer) => {
      reply = Buffer.concat([reply, chunk]);
      const verdict = greeting.answer(reply);
      if (verdict !== 'more') done(verdict === 'ready');
      else if (reply.length > 4096) done(false);
    });
    const hello = greeting.hello(credentials);
    if (hello.length > 0) socket.write(hello);
  });
}

/**
 * PostgreSQL: a protocol 3.0 StartupMessage for the database's user and database. The server asks
 * for the password (`R`) once its final server takes logins; while it starts, recovers or shuts down
 * it answers an error (`E`, "the database system is starting up"). The connection is then closed
 * before any password is sent, which PostgreSQL ends quietly (as pg_isready does).
 */
export const postgresGreeting: Greeting = {
  hello: (c) => {
    const fields = Buffer.from(`user\0${c.username}\0database\0${c.database}\0\0`, 'utf8');
    const message = Buffer.alloc(8 + fields.length);
    message.writeInt32BE(message.length, 0);
    message.writeInt32BE(196608, 4); // protocol 3.0
    fields.copy(message, 8);
    return message;
  },
  answer: (reply) => {
    if (reply.length < 1) return 'more';
    return reply[0] === 0x52 ? 'ready' : 'not-yet'; // 'R': an authentication request
  },
};

/**
 * Redis: AUTH with the database's password, then PING. `+OK` then `+PONG` once it serves; while it
 * loads its data the PING is answered `-LOADING` (an unauthenticated PING would be answered
 * `-NOAUTH` even then, so the login is part of the knock).
 */
export const redisGreeting: Greeting = {
  hello: (c) => {
    const bulk = (s: string): string => `$${Buffer.byteLength(s, 'utf8')}\r\n${s}\r\n`;
    return Buffer.from(`*2\r\n${bulk('AUTH')}${bulk(c.password)}*1\r\n${bulk('PING')}`, 'utf8');
  },
  answer: (reply) => {
    const lines = reply.toString('latin1').split('\r\n');
    if (lines.length < 2) return 'more';
    if (lines[0] !== '+OK') return 'not-yet';
    if (lines.length < 3) return 'more';
    return lines[1] === '+PONG' ? 'ready' : 'not-yet';
  },
};
