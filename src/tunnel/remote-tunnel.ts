// A tunnel held by another instance: its visitors' requests and upgrades are forwarded there, signed, streamed both ways.
import http, { type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import net, { type Socket } from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { displayHost, forwardedHeaders, forwardedValues, hasNoRequestBody, upgradeRequestHead } from '../proxy/app-proxy.js';
import { badGatewayPage, gatewayTimeoutPage, prefersJson, unavailablePage, writePage, writeRawPage, type Page } from '../proxy/pages.js';
import { failResponse, joinUpgrade, relayResponse } from '../proxy/relay.js';
import type { StreamTarget } from '../proxy/routing-table.js';
import type { InstanceCalls } from './instance-calls.js';

/** What every remote tunnel of one instance shares. */
export interface RemoteTunnelContext {
  readonly calls: InstanceCalls;
  /** The public scheme (X-Forwarded-Proto of a plain request). */
  readonly protocol: string;
  /** Keep-alive connections to the other instances (one agent per scheme). */
  readonly agents: { readonly http: http.Agent; readonly https: https.Agent };
  /** Longest wait for the holder to answer with a head (default 60 s; a started answer may stream as long as it likes). */
  readonly timeoutMs?: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

const DEFAULT_TIMEOUT_MS = 60_000;
/** Errors that mean the holder could not be reached at all: its tunnel is offline from here. */
/** Methods safe to send twice. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
/** Longest wait for the holder to accept a connection. */
const CONNECT_TIMEOUT_MS = 5000;
const CONNECT_TIMEOUT = 'ECONNECTTIMEOUT';
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN', CONNECT_TIMEOUT]);

/** The answer of a tunnel whose client is not connected (here: whose instance cannot be reached). */
export function offlineTunnelPage(host: string): Page {
  return unavailablePage(host, 'no tunnel client is connected');
}

/**
 * The route target of a tunnel whose client is connected to another instance (`holder`, reached at
 * `url`, its SLIPWAY_INSTANCE_URL). Each request goes there with Node's HTTP client, bodies piped
 * both ways (back-pressure from either end reaches the other), with the visitor's headers as an app
 * would get them plus a signed call naming the holder, the visitor's address and scheme. The holder
 * verifies the call and serves it from its own tunnel (src/tunnel/forwarded-calls.ts).
 */
export class RemoteTunnel implements StreamTarget {
  readonly #holder: string;
  readonly #url: URL;
  readonly #context: RemoteTunnelContext;

  constructor(holder: string, url: string, context: RemoteTunnelContext) {
    this.#holder = holder;
    this.#url = new URL(url);
    this.#context = context;
  }

  get holder(): string {
    return this.#holder;
  }

  get url(): string {
    return this.#url.origin;
  }

  handleRequest(req: IncomingMessage, res: ServerResponse): void {
    this.#forward(req, res, false);
  }

  #forward(req: IncomingMessage, res: ServerResponse, retried: boolean): void {
    const host = displayHost(req);
    const secure = this.#url.protocol === 'https:';
    const headers = [...forwardedHeaders(req, this.#context.protocol), ...this.#sign(req)];
    let proxyReq: ClientRequest;
    try {
      proxyReq = (secure ? https : http).request({
        host: this.#url.hostname,
        port: this.#url.port === '' ? undefined : Number(this.#url.port),
        method: req.method,
        path: req.url,
        headers,
        agent: secure ? this.#context.agents.https : this.#context.agents.http,
      });
    } catch (err) {
      this.#context.log('warn', 'a tunnel request cannot be forwarded', { host, error: String(err) });
      return failResponse(res, badGatewayPage(host));
    }
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      proxyReq.destroy(new Error(`the instance holding the tunnel sent no answer within ${this.#timeoutMs} ms`));
    }, this.#timeoutMs);
    // A holder that does not even accept the connection (its host down) is offline: no 60 s wait for it.
    proxyReq.once('socket', (socket: Socket) => {
      if (!socket.connecting) return;
      const connectTimer = setTimeout(() => proxyReq.destroy(Object.assign(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`), { code: CONNECT_TIMEOUT })), CONNECT_TIMEOUT_MS);
      socket.once('connect', () => clearTimeout(connectTimer));
      socket.once('close', () => clearTimeout(connectTimer));
    });
    const onClose = (): void => {
      clearTimeout(timer);
      if (!res.writableFinished) proxyReq.destroy();
    };
    res.once('close', onClose);
    const onError = (): void => void proxyReq.destroy();
    req.once('error', onError);
    if (hasNoRequestBody(req)) proxyReq.end();
    else req.pipe(proxyReq);
    relayResponse(proxyReq, res, {
      onStatus: () => clearTimeout(timer),
      onFailure: (err) => {
        clearTimeout(timer);
        // A kept-alive connection the holder had just closed (the keep-alive race): a request without a body goes again.
        if (!retried && err.code === 'ECONNRESET' && proxyReq.reusedSocket && hasNoRequestBody(req) && IDEMPOTENT.has(req.method ?? '')) {
          res.off('close', onClose);
          req.off('error', onError);
          this.#forward(req, res, true);
          return;
        }
        const unreachable = UNREACHABLE.has(err.code ?? '');
        this.#context.log('warn', unreachable ? 'the instance holding a tunnel cannot be reached' : 'a forwarded tunnel request failed', {
          host,
          holder: this.#holder,
          error: err.message,
          code: err.code,
        });
        const page = unreachable ? offlineTunnelPage(host) : timedOut ? gatewayTimeoutPage(host) : badGatewayPage(host);
        try {
          writePage(res, page, prefersJson(req.headers.accept));
        } catch {
          res.destroy();
        }
      },
    });
  }

  /** An upgrade: one connection to the holder, sent the signed upgrade head, joined to the visitor's once it answers. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const host = displayHost(req);
    const secure = this.#url.protocol === 'https:';
    const port = this.#url.port === '' ? (secure ? 443 : 80) : Number(this.#url.port);
    const upstream = secure ? tls.connect({ host: this.#url.hostname, port, servername: net.isIP(this.#url.hostname) === 0 ? this.#url.hostname : undefined }) : net.connect({ host: this.#url.hostname, port });
    let answered = false;
    let joined = false;
    const refuse = (page: Page, reason: string): void => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      this.#context.log('warn', 'a forwarded tunnel upgrade failed', { host, holder: this.#holder, error: reason });
      writeRawPage(socket, page);
      upstream.destroy();
    };
    const timer = setTimeout(() => refuse(gatewayTimeoutPage(host), 'no answer in time'), this.#timeoutMs);
    upstream.once(secure ? 'secureConnect' : 'connect', () => {
      upstream.setNoDelay(true);
      const signed = this.#sign(req);
      const lines: string[] = [];
      for (let i = 0; i + 1 < signed.length; i += 2) lines.push(`${signed[i]}: ${signed[i + 1]}`);
      // The head ends with a blank line: the signed headers go before it.
      joinUpgrade(
        socket,
        upstream,
        `${upgradeRequestHead(req, this.#context.protocol).slice(0, -2)}${lines.join('\r\n')}\r\n\r\n`,
        head,
        () => {
          if (answered) return false;
          answered = joined = true;
          clearTimeout(timer);
          return true;
        },
        (reason) => refuse(badGatewayPage(host), reason),
      );
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (joined) socket.destroy();
      else refuse(UNREACHABLE.has(err.code ?? '') ? offlineTunnelPage(host) : badGatewayPage(host), err.message);
    });
    upstream.once('close', () => {
      clearTimeout(timer);
      if (joined) socket.destroy();
      else refuse(badGatewayPage(host), 'the instance holding the tunnel closed the connection without an answer');
    });
    socket.on('error', () => upstream.destroy());
    socket.once('close', () => upstream.destroy());
  }

  get #timeoutMs(): number {
    return this.#context.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** The signed call's headers for this request (the visitor as this edge saw it). */
  #sign(req: IncomingMessage): string[] {
    const visitor = forwardedValues(req, this.#context.protocol);
    return this.#context.calls.sign({
      method: req.method ?? 'GET',
      host: req.headers.host ?? '',
      path: req.url ?? '/',
      forwardedFor: visitor.for,
      proto: visitor.proto,
      target: this.#holder,
    });
  }
}
