// `slipway db connect`'s server side: an authenticated WebSocket per client connection, carried to the database over its private network (no port is ever published).
import net from 'node:net';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, createWebSocketStream } from 'ws';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { serviceContainer, serviceNetworkName } from '../runtime/service.js';
import type { DatabasesContext } from './database-context.js';
import { getDatabaseRow } from './database-access.js';
import { ENGINES } from './engines.js';

const CONNECT_PATH = /^\/api\/v1\/databases\/([^/?#]{1,200})\/connect$/;
/** Time to reach the database from the control plane. */
const DIAL_TIMEOUT_MS = 10_000;

export interface DatabaseConnector {
  /** Takes an upgrade to `/api/v1/databases/{id}/connect` (true), or leaves it (false). */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
  close(): void;
}

/**
 * Each WebSocket carries one TCP connection to the database, both ways, until either side closes.
 * The caller needs the developer role (as for credentials); a database that does not run is a 409
 * saying how to start it; anything else of the policy answers as the API does.
 */
export function databaseConnector(
  ctx: DatabasesContext,
  authenticate: (authorization: string | undefined) => Promise<Principal>,
  refuse: (socket: Duplex, err: unknown) => void,
): DatabaseConnector {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  const open = new Set<net.Socket>();
  return {
    handleUpgrade(req, socket, head) {
      const match = CONNECT_PATH.exec((req.url ?? '').split('?')[0] ?? '');
      if (match === null) return false;
      void (async () => {
        let target: { host: string; port: number };
        try {
          const header = req.headers.authorization;
          const principal = await authenticate(header?.startsWith('Bearer ') === true ? header.slice(7) : undefined);
          const row = await getDatabaseRow(ctx, principal, decodeURIComponent(match[1] ?? ''), 'change');
          if (row.status !== 'running') {
            throw new DomainError('invalid_state', `database "${row.name}" is ${row.status}: start it first (slipway db start ${row.name})`);
          }
          const container = await serviceContainer(ctx.engine, ctx.instanceId, row.id);
          const host = container === undefined ? null : ((await ctx.engine.containerAddress?.(container.id, serviceNetworkName(ctx.instanceId, row.id))) ?? null);
          if (host === null) throw new DomainError('invalid_state', `database "${row.name}" has no running container`);
          target = { host, port: ENGINES[row.engine].port };
        } catch (err) {
          refuse(socket, err);
          return;
        }
        wss.handleUpgrade(req, socket, head, (ws) => {
          const tcp = net.connect({ host: target.host, port: target.port, timeout: DIAL_TIMEOUT_MS });
          open.add(tcp);
          tcp.once('connect', () => tcp.setTimeout(0));
          tcp.once('timeout', () => tcp.destroy());
          const stream = createWebSocketStream(ws);
          const end = (): void => {
            open.delete(tcp);
            tcp.destroy();
            stream.destroy();
          };
          tcp.on('error', end);
          tcp.on('close', end);
          stream.on('error', end);
          stream.on('close', end);
          stream.pipe(tcp).pipe(stream);
        });
      })();
      return true;
    },
    close() {
      for (const tcp of open) tcp.destroy();
      wss.close();
    },
  };
}
