// Test receivers of notifications on loopback: an HTTP server recording every request by path (with scripted answers), and a real SMTP server (smtp-server).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface Received {
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
  readonly at: number;
}

/** An answer the receiver gives: a status (and optional body, delay, Location), or a function of the request's count on that path. */
export type Answer = { status: number; body?: string; delayMs?: number; location?: string };

export interface HttpReceiver {
  readonly url: string;
  readonly received: Received[];
  /** Sets how `path` answers (default 200). */
  answer(path: string, answer: Answer | ((count: number) => Answer)): void;
  on(path: string): Received[];
  close(): Promise<void>;
}

export async function startHttpReceiver(): Promise<HttpReceiver> {
  const received: Received[] = [];
  const answers = new Map<string, Answer | ((count: number) => Answer)>();
  const pending = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks), at: Date.now() });
      const count = received.filter((r) => r.path === path).length;
      const scripted = answers.get(path);
      const answer = typeof scripted === 'function' ? scripted(count) : (scripted ?? { status: 200, body: 'ok' });
      const send = (): void => {
        res.writeHead(answer.status, answer.location === undefined ? {} : { location: answer.location });
        res.end(answer.body ?? '');
      };
      if (answer.delayMs === undefined) send();
      else {
        const timer = setTimeout(() => {
          pending.delete(timer);
          send();
        }, answer.delayMs);
        pending.add(timer);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    answer: (path, answer) => void answers.set(path, answer),
    on: (path) => received.filter((r) => r.path === path),
    close: async () => {
      for (const timer of pending) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface Mail {
  readonly from: string;
  readonly to: string[];
  readonly data: string;
}

export interface SmtpReceiver {
  /** smtp://127.0.0.1:<port> */
  readonly url: string;
  readonly mails: Mail[];
  close(): Promise<void>;
}

/**
 * A real SMTP server on loopback that accepts every recipient except those starting with `refuse`,
 * which get 550. No TLS offered, unless `starttls`: then STARTTLS with smtp-server's own
 * self-signed certificate, as the package offers by default.
 */
export async function startSmtpReceiver(options: { starttls?: boolean } = {}): Promise<SmtpReceiver & { readonly secured: () => boolean }> {
  const mails: Mail[] = [];
  let secured = false;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: options.starttls === true ? ['AUTH'] : ['STARTTLS', 'AUTH'],
    onMailFrom(_address, session, callback) {
      secured = secured || session.secure;
      callback();
    },
    logger: false,
    onRcptTo(address, _session, callback) {
      if (address.address.startsWith('refuse')) {
        const err = Object.assign(new Error('mailbox unavailable: this server refuses the recipient'), { responseCode: 550 });
        callback(err);
        return;
      }
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({
          from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address),
          data: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.server.address() as AddressInfo;
  return { url: `smtp://127.0.0.1:${port}`, mails, secured: () => secured, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
