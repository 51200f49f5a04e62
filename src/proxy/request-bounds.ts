// Bounds on the request side of the one HTTP server: every request is received, or closed, within bounded time.
import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { EdgeLimits } from '../config.js';

/** How often Node checks its own head and request timeouts (it scans open connections; cheap). */
const CHECK_INTERVAL_MS = 1000;

/** Options for `http.createServer` that the bounds need (Node reads them only at creation). */
export function boundedServerOptions(limits: EdgeLimits): ServerOptions {
  return { connectionsCheckingInterval: Math.min(CHECK_INTERVAL_MS, limits.headersTimeoutMs) };
}

/**
 * Applies `limits` to `server`. Only the receiving side is bounded: a response may stream for as
 * long as it likes (followed logs, proxied downloads, WebSocket and tunnel connections after their
 * upgrade), since the socket's own inactivity timeout stays off.
 *
 * - Node's `headersTimeout` bounds the head; its `requestTimeout` (the upload bound) is the
 *   backstop for every request.
 * - A request with a body gets its own deadline: `requestTimeoutMs` for an ordinary (JSON) request,
 *   `uploadTimeoutMs` for one `isUpload` says is an upload; the connection is closed if the body has
 *   not arrived by then.
 * - While a body is arriving, a socket silent for `bodyIdleTimeoutMs` is closed, unless the silence
 *   is ours (the body is buffered and nobody has read it yet: back-pressure, not a slow client).
 * - Connections above `maxConnections`, or above `maxConnectionsPerAddress` from one address, are
 *   closed as they arrive.
 */
export function boundRequests(server: Server, limits: EdgeLimits, isUpload: (req: IncomingMessage) => boolean): ConnectionGate {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.uploadTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.timeout = 0;
  server.maxConnections = limits.maxConnections;

  const perAddress = new Map<string, number>();
  const counted = new WeakSet<Socket>();
  const admit = (socket: Socket): boolean => {
    if (counted.has(socket)) return true;
    const address = socket.remoteAddress ?? 'unknown';
    const open = (perAddress.get(address) ?? 0) + 1;
    if (open > limits.maxConnectionsPerAddress) {
      socket.destroy();
      return false;
    }
    counted.add(socket);
    perAddress.set(address, open);
    socket.once('close', () => {
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    });
    return true;
  };
  server.on('connection', (socket: Socket) => void admit(socket));

  // Before the handlers, so the bounds hold whatever they do with the request.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!hasBody(req)) return;
    const socket = req.socket;
    const deadline = setTimeout(() => {
      if (!req.complete) socket.destroy();
    }, isUpload(req) ? limits.uploadTimeoutMs : limits.requestTimeoutMs);
    deadline.unref();

    // The socket's inactivity timer is refreshed by every byte the parser receives; Node's server
    // first offers its 'timeout' to the request, and destroys the socket only if nobody listens.
    const onTimeout = (): void => {
      if (req.complete) return;
      if (req.readableLength > 0) {
        // Unread body is waiting for us (a slow reader upstream, or a handler yet to start): not the client's silence.
        socket.setTimeout(limits.bodyIdleTimeoutMs);
        return;
      }
      socket.destroy();
    };
    socket.setTimeout(limits.bodyIdleTimeoutMs);
    req.on('timeout', onTimeout);
    const done = (): void => {
      clearTimeout(deadline);
      req.off('timeout', onTimeout);
      // The response may now stream as long as it likes. Once it has finished, Node has set the
      // keep-alive timer instead: leave that one.
      if (!res.writableFinished && !socket.destroyed) socket.setTimeout(0);
    };
    req.once('end', done);
    req.once('close', done);
  });
  return { admit };
}

/** The per-address connection cap, for connections served outside the HTTP server (see front-door.ts). */
export interface ConnectionGate {
  /** Counts the connection against its address (once); false when over the cap: it is closed. */
  admit(socket: Socket): boolean;
}

/** True when the request declares a body (a length above zero, or chunked). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
