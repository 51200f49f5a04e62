// `slipway db connect`'s client side: a listener on 127.0.0.1 whose every connection is carried to the database over an authenticated WebSocket.
import net from 'node:net';
import WebSocket from 'ws';
import { relayWebSocket } from '../core/ws-relay.js';
import { CliError } from './cli-error.js';

export interface DbConnectOptions {
  readonly serverUrl: string;
  readonly bearer: string;
  readonly databaseId: string;
  readonly port: number;
  readonly signal: AbortSignal;
  /** Told once the listener is up, with the port it holds. */
  readonly onListening: (port: number) => void;
  /** Told when a connection could not be carried (the server's refusal, a lost stream). */
  readonly onProblem: (message: string) => void;
}

/** Listens until `signal` aborts; then the listener and every carried connection close. */
export async function runDbConnect(options: DbConnectOptions): Promise<void> {
  const endpoint = new URL(`/api/v1/databases/${encodeURIComponent(options.databaseId)}/connect`, options.serverUrl);
  endpoint.protocol = endpoint.protocol === 'https:' ? 'wss:' : 'ws:';
  const open = new Set<{ close(): void }>();
  // No Nagle delay on the client's side either (small query-answer turns).
  const server = net.createServer({ noDelay: true }, (local) => {
    const ws = new WebSocket(endpoint, { headers: { authorization: `Bearer ${options.bearer}` }, perMessageDeflate: false, handshakeTimeout: 15_000 });
    const entry = { close: () => { ws.terminate(); local.destroy(); } };
    open.add(entry);
    local.pause();
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => {
        let message = `the server answered ${res.statusCode}`;
        try {
          message = (JSON.parse(text) as { message?: string }).message ?? message;
        } catch {
          // Not JSON: the status says enough.
        }
        options.onProblem(message);
        entry.close();
      });
    });
    ws.on('error', (err) => {
      options.onProblem(err.message);
      entry.close();
    });
    ws.on('close', (code, reason) => {
      // The server ended the stream on purpose (a revoked key, a stopped database): say why.
      if (code >= 4000) options.onProblem(reason.toString() || `the server closed the connection (${code})`);
    });
    ws.on('open', () => {
      relayWebSocket(ws, local, () => {
        open.delete(entry);
        local.destroy();
      });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new CliError(`port ${options.port} on 127.0.0.1 is in use: choose another with --port`) : err),
    );
    server.listen(options.port, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  options.onListening(typeof address === 'object' && address !== null ? address.port : options.port);
  await new Promise<void>((resolve) => {
    if (options.signal.aborted) return resolve();
    options.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  for (const entry of open) entry.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
