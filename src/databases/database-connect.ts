// `slipway db connect`'s server side: an authenticated WebSocket per client connection, carried to the database over its private network (no port is ever published).
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { DomainError } from '../core/errors.js';
import { RelayReads, relayWebSocket } from '../core/ws-relay.js';
import type { Principal } from '../core/principal.js';
import type { ServiceDialer } from '../runtime/service-host.js';
import type { DatabasesContext } from './database-context.js';
import { getDatabaseRow } from './database-access.js';
import { ENGINES } from './engines.js';

const CONNECT_PATH = /^\/api\/v1\/databases\/([^/?#]{1,200})\/connect$/;
/** Time to reach the database from the control plane. */
const DIAL_TIMEOUT_MS = 10_000;
/** How often every open stream's key and access are looked at again, and the link pinged. */
const RECHECK_MS = 5_000;
/** A link whose pong has not come back in this time is lost: the stream is ended. */
const LINK_LOST_MS = 30_000;
/** The WebSocket close code of a stream ended because its key or its access went away. */
export const ACCESS_ENDED = 4403;
/** The close code of a stream whose database stopped or lost its container. */
export const DATABASE_ENDED = 4409;

interface OpenStream {
  readonly tcp: Duplex;
  readonly ws: WebSocket;
  readonly bearer: string | undefined;
  readonly databaseId: string;
  lastPong: number;
  checking: boolean;
}

/** Ends a stream with a code and a reason the client shows; the database connection goes at once. */
function closeWith(entry: OpenStream, code: number, reason: string): void {
  entry.ws.close(code, reason.slice(0, 120));
  entry.tcp.destroy();
  // A client that never answers the close frame is cut after a while.
  setTimeout(() => entry.ws.terminate(), 5_000).unref();
}

export interface DatabaseConnector {
  /** Takes an upgrade to `/api/v1/databases/{id}/connect` (true), or leaves it (false). */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
  close(): void;
}

/**
 * Each WebSocket carries one TCP connection to the database, both ways, until either side closes.
 * The caller needs the developer role (as for credentials); a database that does not run is a 409
 * saying how to start it; anything else of the policy answers as the API does. An open stream is
 * checked again every few seconds: a revoked key, a lost role or a deleted or stopped database
 * closes it with the reason, and so does a link whose pings go unanswered.
 */
export function databaseConnector(
  ctx: DatabasesContext,
  authenticate: (authorization: string | undefined) => Promise<Principal>,
  refuse: (socket: Duplex, err: unknown) => void,
): DatabaseConnector {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  const open = new Set<OpenStream>();
  const recheck = async (entry: OpenStream): Promise<void> => {
    if (entry.checking) return;
    entry.checking = true;
    try {
      if (Date.now() - entry.lastPong > LINK_LOST_MS) {
        entry.ws.terminate();
        return;
      }
      entry.ws.ping();
      let principal: Principal;
      try {
        principal = await authenticate(entry.bearer);
      } catch {
        closeWith(entry, ACCESS_ENDED, 'the API key was revoked or expired');
        return;
      }
      let row;
      try {
        row = await getDatabaseRow(ctx, principal, entry.databaseId, 'change');
      } catch (err) {
        closeWith(entry, ACCESS_ENDED, err instanceof DomainError && err.code !== 'not_found' ? err.message : 'the database is gone or no longer yours');
        return;
      }
      if (row.status !== 'running') closeWith(entry, DATABASE_ENDED, `database "${row.name}" is ${row.status}`);
    } catch {
      // A failing look (the database of the control plane briefly away) is tried again next round.
    } finally {
      entry.checking = false;
    }
  };
  const timer = setInterval(() => {
    for (const entry of open) void recheck(entry);
  }, RECHECK_MS);
  timer.unref();
  return {
    handleUpgrade(req, socket, head) {
      const match = CONNECT_PATH.exec((req.url ?? '').split('?')[0] ?? '');
      if (match === null) return false;
      void (async () => {
        let dial: ServiceDialer;
        const header = req.headers.authorization;
        const bearer = header?.startsWith('Bearer ') === true ? header.slice(7) : undefined;
        let databaseId: string;
        try {
          const principal = await authenticate(bearer);
          const row = await getDatabaseRow(ctx, principal, decodeURIComponent(match[1] ?? ''), 'change');
          databaseId = row.id;
          if (row.status !== 'running') {
            throw new DomainError('invalid_state', `database "${row.name}" is ${row.status}: start it first (slipway db start ${row.name})`);
          }
          const dialer = await ctx.services.dialer(ctx.instanceId, row.id, ENGINES[row.engine].port, DIAL_TIMEOUT_MS);
          if (dialer === null) throw new DomainError('invalid_state', `database "${row.name}" has no running container`);
          dial = dialer;
        } catch (err) {
          refuse(socket, err);
          return;
        }
        wss.handleUpgrade(req, socket, head, (ws) => {
          const reads = new RelayReads();
          const tcp = dial(reads.onread);
          const entry: OpenStream = { tcp, ws, bearer, databaseId, lastPong: Date.now(), checking: false };
          open.add(entry);
          ws.on('pong', () => (entry.lastPong = Date.now()));
          relayWebSocket(ws, tcp, () => {
            open.delete(entry);
            tcp.destroy();
          }, reads);
        });
      })();
      return true;
    },
    close() {
      clearInterval(timer);
      for (const entry of open) {
        entry.tcp.destroy();
        entry.ws.terminate();
      }
      wss.close();
    },
  };
}
