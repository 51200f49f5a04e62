// The first look at each connection to Node: a connected tunnel's visitors get a raw byte pipe; anything else goes to the HTTP server.
import type { Server as HttpServer } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionHooks, RoutingTable } from './routing-table.js';
import { headAlreadyWaited } from './proxy-protocol.js';

/** Serves a whole visitor connection itself (a connected tunnel), given the bytes read so far. */
export interface ConnectionTarget {
  /**
   * Takes the connection over. `head` holds every byte read so far (at least the first request's
   * head). The socket is paused: the target resumes it when it wants more (never the caller, whose
   * resume would undo a pause the target made while taking `head`, and lift its back-pressure).
   */
  handleConnection(socket: Socket, head: Buffer): void;
}

export interface FrontDoorOptions {
  readonly http: HttpServer;
  /** Who takes a connection whose first request names `host` (the Host header as sent); undefined: the HTTP server. */
  target(host: string, socket: Socket): ConnectionTarget | undefined;
  /** How long the first request head may take to arrive; the connection is closed after that. */
  readonly headTimeoutMs: number;
  /** Answers a first head that did not arrive in time (408; `bytes`: what did), then closes; default: close without a word. */
  readonly answerLateHead?: ((socket: Socket, bytes: Buffer | undefined) => void) | undefined;
}

/** A first head longer than this is not looked into: the HTTP server takes it (and refuses it if too long). */
const MAX_SNIFF_BYTES = 16 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
const HOST_LINE = /\r\nhost[ \t]*:[ \t]*([^\r\n]*)/i;
/** A call from another instance (a visitor it forwards): the HTTP server verifies it, whatever its Host. */
const FORWARD_LINE = /\r\nslipway-forward-/i;
/** The start of a request line: a method token (RFC 9110 §9), possibly after empty lines. */
const METHOD_START = /^(?:\r?\n)*[A-Za-z]{0,20}(?: |$)/;
/**
 * A connection HAProxy hands over raw after it waited the whole head timeout itself (see
 * proxy-protocol.ts): what it had is written at once, so only a short wait is left for it.
 */
const LATE_GRACE_MS = 500;

/**
 * Returns a connection handler that reads the first request head of each connection and hands the
 * connection to a {@link ConnectionTarget} when its Host is one (so a tunnel's visitors cost one
 * byte pipe instead of two HTTP stacks), or else to the HTTP server with the bytes put back. The
 * HTTP server then applies its own bounds from the start of the connection.
 */
export function frontDoor(options: FrontDoorOptions): (socket: Socket) => void {
  return (socket: Socket) => {
    let buffered: Buffer | undefined;
    const timeoutMs = headAlreadyWaited(socket) ? Math.min(LATE_GRACE_MS, options.headTimeoutMs) : options.headTimeoutMs;
    const timer = setTimeout(() => {
      stop();
      if (options.answerLateHead === undefined) socket.destroy();
      else options.answerLateHead(socket, buffered);
    }, timeoutMs);
    const stop = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onEnd);
      socket.off('end', onEnd);
    };
    const onEnd = (): void => {
      stop();
      socket.destroy();
    };
    const onData = (chunk: Buffer): void => {
      buffered = buffered === undefined ? chunk : Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf(HEAD_END);
      // Bytes that cannot start a request (binary, TLS on the plain port) go to the HTTP server at
      // once, whose parser refuses them (400), instead of waiting for a head that will never end.
      if (end === -1 && buffered.length < MAX_SNIFF_BYTES && METHOD_START.test(buffered.toString('latin1', 0, 64))) return;
      stop();
      const bytes = buffered;
      const headText = end === -1 ? undefined : bytes.toString('latin1', 0, end + 2);
      const host = headText === undefined || FORWARD_LINE.test(headText) ? undefined : HOST_LINE.exec(headText)?.[1]?.trim();
      let target: ConnectionTarget | undefined;
      try {
        target = host === undefined ? undefined : options.target(host, socket);
      } catch {
        target = undefined;
      }
      if (target !== undefined) {
        socket.pause();
        // As Node's HTTP server does for its sockets: no Nagle delay on the last segment of an answer.
        socket.setNoDelay(true);
        target.handleConnection(socket, bytes);
      } else {
        // Never paused on the way: Node's HTTP server reads the socket's handle itself and stops it
        // only on a 'pause' event, which a socket already paused does not emit again; a pause and
        // resume around the hand-over left every body read at full speed whatever its reader did
        // (a 500 MiB upload held in memory). With our listener gone and none yet, the bytes put back
        // wait in the socket's buffer until the server's own listener (added right here) reads them.
        socket.unshift(bytes);
        options.http.emit('connection', socket);
      }
    };
    socket.on('data', onData);
    socket.on('error', onEnd);
    socket.on('end', onEnd);
  };
}

/**
 * The target of a connection whose first request names `host`, when that is a connected tunnel
 * in `table` (undefined otherwise): the tunnel serves the connection whole, with `hooks` made for
 * its subdomain.
 */
export function connectedTunnel(
  table: RoutingTable,
  host: string,
  hooks: (subdomain: string) => ConnectionHooks = () => ({}),
): ConnectionTarget | undefined {
  const resolution = table.resolveHost(host);
  const route = resolution?.route;
  if (resolution === null || route?.kind !== 'tunnel' || route.state !== 'connected') return undefined;
  const serve = route.target.handleConnection?.bind(route.target);
  if (serve === undefined) return undefined;
  const subdomain = resolution.subdomain;
  return { handleConnection: (socket, head) => serve(socket, head, host, hooks(subdomain)) };
}
