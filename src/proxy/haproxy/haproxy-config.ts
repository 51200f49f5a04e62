// HAProxy's configuration, error bodies and host map, rendered from Slipway's settings and the routes of the moment.
import type { EdgeLimits } from '../../config.js';
import { badGatewayPage, gatewayTimeoutPage, renderPage, unavailablePage, type Page } from '../pages.js';
import { LATE_HEAD_MARK } from '../proxy-protocol.js';

/** The backend that holds one (dynamic) server per live upstream, chosen per request by the host map. */
export const APPS_BACKEND = 'apps';

/** Where HAProxy's files live (all absolute, all free of spaces: see `isSafeWord`). */
export interface HaproxyFiles {
  readonly dir: string;
  readonly config: string;
  /** `<host>/<i> <server>`: the server of each replica of a live host. */
  readonly hostMap: string;
  /** `<host> <n>`: how many replicas (servers) a live host has. */
  readonly countMap: string;
  readonly socket: string;
  /** The crt-list of the TLS bind: empty on disk; certificates are added in memory over the runtime API. */
  readonly crtList: string;
  /** The Unix socket the Node process listens on for HAProxy's connections (API, dashboard, tunnels, pages). */
  readonly nodeSocket: string;
  /** The Unix socket for requests HAProxy received over TLS (HTTPS on). */
  readonly nodeTlsSocket: string;
}

/** One app server HAProxy knows: a name for the runtime API and a loopback upstream. */
export interface AppServer {
  readonly name: string;
  readonly host: string;
  readonly port: number;
}

export interface HaproxyConfigInput {
  readonly files: HaproxyFiles;
  /** Public listen address and port (SLIPWAY_HOST, SLIPWAY_PORT). */
  readonly bindHost: string;
  readonly bindPort: number;
  readonly limits: EdgeLimits;
  /** 'http' or 'https' for X-Forwarded-Proto. */
  readonly publicProtocol: string;
  /** Whether live app hosts go straight to their app; false sends every request to Node. */
  readonly fastPath: boolean;
  /** HAProxy's threads (`nbthread`); undefined: one per CPU, HAProxy's default. */
  readonly threads?: number | undefined;
  /** HTTPS terminated by HAProxy (SLIPWAY_HTTPS_PORT): its port (requests over TLS reach Node on `files.nodeTlsSocket`). */
  readonly tls?: { readonly bindPort: number } | undefined;
  /** Servers to declare at start (the live upstreams of the moment); more are added at run time. */
  readonly servers: readonly AppServer[];
  /**
   * SLIPWAY_DOMAIN (a checked DNS name): requests for hosts under it that HAProxy hands to Node
   * (tunnels, apps not live) get Slipway's pages when HAProxy itself must answer; the API host gets
   * JSON. Undefined: every host handed to Node gets JSON.
   */
  readonly domain?: string | undefined;
}

/**
 * A head that repeats its Host or Content-Length line (in any case, lines apart), up to its end:
 * PCRE, case-insensitive (a named group: HAProxy compiles ACL patterns without numbered captures).
 * HAProxy's parser keeps one of two identical Host lines, so it is caught on the raw bytes.
 */
const REPEATED_HEADER = '(?s)^(?:(?!\\r\\n\\r\\n).)*?\\r\\n(?<name>host|content-length)[ \\t]*:(?:(?!\\r\\n\\r\\n).)*?\\r\\n\\k<name>[ \\t]*:';

/** Longest wait for an app to send its response head, as the Node plane's upstream timeout. */
const UPSTREAM_TIMEOUT = '60s';
/** Idle bound of an upgraded (WebSocket, tunnel) connection; tunnels send heartbeats well within it. */
const TUNNEL_TIMEOUT = '1h';

/** Renders haproxy.cfg. Every value interpolated is a number, a checked path or a fixed word. */
export function renderHaproxyConfig(input: HaproxyConfigInput): string {
  const { files, limits } = input;
  const ms = (value: number): string => `${value}ms`;
  const bind = input.bindHost.includes(':') ? `[${input.bindHost}]:${input.bindPort}` : `${input.bindHost}:${input.bindPort}`;
  const proto = input.publicProtocol === 'https' ? 'https' : 'http';
  const tls = input.tls;
  const tlsBind = tls === undefined ? '' : input.bindHost.includes(':') ? `[${input.bindHost}]:${tls.bindPort}` : `${input.bindHost}:${tls.bindPort}`;
  // Plain requests take the fast path unless Node must see them (HTTPS on: challenges and 308s); TLS ones always may.
  const fastCondition = input.fastPath ? '' : tls !== undefined ? '{ ssl_fc } ' : 'FALSE ';
  const page = (name: string): string => `${files.dir}/${name}`;
  const domain = input.domain;
  return `# Written by Slipway at every start of HAProxy; routes and servers change through the runtime API.
global
  stats socket ${files.socket} mode 600 level admin
  stats timeout 30s
  hard-stop-after 5s
${input.threads === undefined ? '' : `  nbthread ${input.threads}
`}
defaults
  mode http
  timeout connect 5s
  timeout client ${ms(limits.bodyIdleTimeoutMs)}
  timeout http-request ${ms(limits.headersTimeoutMs)}
  timeout http-keep-alive ${ms(limits.keepAliveTimeoutMs)}
  timeout server ${UPSTREAM_TIMEOUT}
  timeout tunnel ${TUNNEL_TIMEOUT}
  timeout client-fin 30s
  timeout server-fin 30s
  http-reuse safe
  # Bodies of known length (and upgraded connections) move from socket to socket through a kernel
  # pipe (splice), never copied into HAProxy's buffers: measured, +12% MiB/s for 1 MiB tunnel bodies.
  option splice-request
  option splice-response
  # A visitor who goes away takes their request with them (as the Node plane destroys the upstream request).
  option abortonclose
  # HAProxy's stream-level refusals (a rule's 400, a body that did not arrive in time: 408) are
  # {error, message} JSON, as Node's are. (Its HTTP/1 parser's own answers ignore every errorfile:
  # see the frontend.)
  errorfile 400 ${page('400.http')}
  errorfile 408 ${page('408.http')}

frontend public
  # TCP first. HAProxy 2.6's HTTP/1 parser answers a malformed head or a late one with its built-in
  # HTML before any errorfile, http-errors section or http-error rule applies (it keeps an errorfile
  # only to close without a word), and drops a repeated identical Host line (so no rule can count
  # it). So each connection's first head is looked at raw: a whole, well-formed head with one Host
  # and one Content-Length line becomes HTTP here; any other (malformed, ambiguous, or not whole
  # within SLIPWAY_HEADERS_TIMEOUT_SECONDS) goes to Node untouched, whose parser and request guard
  # answer exactly as on the Node plane: JSON for the API host, Slipway's page on app hosts.
  mode tcp
  bind ${bind}
${tls === undefined ? '' : `  bind ${tlsBind} ssl crt-list ${files.crtList} strict-sni alpn http/1.1
`}  maxconn ${limits.maxConnections}
  tcp-request connection track-sc0 src table per_address
  tcp-request connection reject if { sc0_conn_cur(per_address) gt ${limits.maxConnectionsPerAddress} }
  tcp-request inspect-delay ${ms(limits.headersTimeoutMs)}
  tcp-request content set-var(txn.head_start) date(0,ms) if !{ var(txn.head_start) -m found }
  tcp-request content set-var(txn.raw) str(malformed) if !HTTP
  tcp-request content set-var(txn.head) req.payload(0,0) if !{ var(txn.raw) -m found }
  tcp-request content set-var(txn.raw) str(repeated) if { var(txn.head) -m reg -i "${REPEATED_HEADER}" }
  tcp-request content unset-var(txn.head)
  # Handed over only because it was not whole in time: Node answers 408 at once (proxy-protocol.ts).
  # (The wait is computed by an action: a condition on "date" would wait for the inspect delay.)
  tcp-request content set-var(txn.head_wait) date(0,ms),sub(txn.head_start) if { var(txn.raw) -m found }
  tcp-request content set-var(txn.raw) str(${LATE_HEAD_MARK}) if { var(txn.head_wait) -m int ge ${Math.max(limits.headersTimeoutMs - 100, limits.headersTimeoutMs / 2)} }
  tcp-request content switch-mode http if !{ var(txn.raw) -m found }
  # Sent to Node in the PROXY header of a raw hand-over (proxy-v2-options unique-id).
  unique-id-format %[var(txn.raw)]
  # Client-address headers are never taken from the visitor; each backend sets its own.
  http-request del-header x-forwarded-for
  http-request del-header x-forwarded-proto
  http-request del-header x-forwarded-host
  http-request del-header forwarded
  http-request del-header x-real-ip
  # The body idle bound: once a request has gone to its server HAProxy 2.6 no longer applies
  # "timeout client" to it (only "timeout server", 60 s, would end it), so a body must arrive whole,
  # or fill a buffer, within SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS before the request is passed on (408).
  http-request wait-for-body time ${ms(limits.bodyIdleTimeoutMs)}
${domain === undefined ? '' : `  # Hosts under the domain (apps not live, tunnels) get Slipway's pages if HAProxy must answer for Node.
  http-request set-var(txn.apphost) req.hdr(host),field(1,:),lower,regsub("[^a-z0-9.-]","",g) if { req.hdr(host),field(1,:),lower -m end .${domain} }
`}  # Only an unambiguous request (one Host, an origin-form target) may take the fast path; anything
  # else goes to the Node process, which refuses it exactly as the Node plane does. ACME HTTP-01
  # challenges are Node's whatever the host.
  http-request set-var(txn.host) req.hdr(host),field(1,:),lower if ${fastCondition}{ req.hdr_cnt(host) eq 1 } { url -m beg / } !{ path_beg /.well-known/acme-challenge/ }
  # A live host has n servers (one per replica): the replica map names each as "<host>/<i>"; one is
  # picked at random per request.
  http-request set-var(txn.replicas) var(txn.host),map_str_int(${files.countMap}) if { var(txn.host) -m found }
  http-request set-var(txn.replica) rand,mod(txn.replicas) if { var(txn.replicas) -m found }
  http-request set-var(txn.server) var(txn.host),concat(/,txn.replica),map(${files.hostMap}) if { var(txn.replica) -m found }
${tls === undefined ? '' : `  use_backend node_tls_raw if { var(txn.raw) -m found } { ssl_fc }
`}  use_backend node_raw if { var(txn.raw) -m found }
  use_backend ${APPS_BACKEND} if { var(txn.server) -m found }
${tls === undefined ? '' : `  # Requests that came over TLS reach Node on its own port: it must not redirect them to https again.
${domain === undefined ? '' : `  use_backend node_tls_apps if { ssl_fc } { var(txn.apphost) -m found }
`}  use_backend node_tls if { ssl_fc }
`}${domain === undefined ? '' : `  use_backend node_apps if { var(txn.apphost) -m found }
`}  default_backend node

backend per_address
  stick-table type ipv6 size 1m expire 10m store conn_cur

backend ${APPS_BACKEND}
  balance roundrobin
  retries 3
  http-request set-header x-forwarded-for %[src]
  http-request set-header x-forwarded-proto ${proto}
${tls === undefined ? '' : `  http-request set-header x-forwarded-proto https if { ssl_fc }
`}  http-request set-header x-forwarded-host %[req.hdr(host)]
  # Servers carry weight 0: a request reaches one only through this rule, never by load balancing.
  use-server %[var(txn.server)] if { var(txn.server) -m found }
  # A status outside 100–599 is no HTTP answer: the visitor gets the 502 page, as from the Node plane.
  http-response return status 502 content-type "text/html; charset=utf-8" lf-file ${page('502.html')} hdr cache-control no-store if { status lt 100 } || { status gt 599 }
  http-error status 502 content-type "text/html; charset=utf-8" lf-file ${page('502.html')} hdr cache-control no-store
  # An app that refuses the connection: the Node plane's 502 page. HAProxy can only call that
  # failure 503, so its answer is marked and turned into a 502 on the way out.
  http-error status 503 content-type "text/html; charset=utf-8" lf-file ${page('503.html')} hdr cache-control no-store hdr x-slipway-answer unreachable
  http-after-response set-status 502 reason "Bad Gateway" if { status 503 } { res.hdr(x-slipway-answer) -m str unreachable }
  http-after-response del-header x-slipway-answer
  http-error status 504 content-type "text/html; charset=utf-8" lf-file ${page('504.html')} hdr cache-control no-store
${input.servers.map((s) => `  server ${s.name} ${s.host}:${s.port} weight 0`).join('\n')}

backend node
  # Node enforces its own bounds on API requests and uploads, and its answers (followed logs, tunnel
  # responses) may pause as long as they like. It learns the visitor's address from the PROXY
  # protocol header, so X-Forwarded-* from the visitor stay untrusted there too.
  timeout server ${TUNNEL_TIMEOUT}
  # A connection to Node carries one visitor's address (the PROXY header), so it belongs to that
  # visitor's connection and is kept alive with it. With "http-reuse safe", HAProxy 2.6 opened a new
  # connection to Node for every request after the first visitor connection had closed.
  http-reuse never
${nodeErrors(page, false)}
  # A Unix socket in HAProxy's private directory: cheaper per request than a loopback TCP hop (the
  # tunnel's raw pipe crosses it twice per request), and no other local user can reach it to forge
  # a PROXY header.
  server node unix@${files.nodeSocket} send-proxy-v2
${rawBackend('node_raw', files.nodeSocket)}${tls === undefined ? '' : rawBackend('node_tls_raw', files.nodeTlsSocket)}${domain === undefined ? '' : nodeBackend('node_apps', files.nodeSocket, page)}${tls === undefined ? '' : nodeBackend('node_tls', files.nodeTlsSocket, page, false)}${
  tls === undefined || domain === undefined ? '' : nodeBackend('node_tls_apps', files.nodeTlsSocket, page)
}`;
}

/**
 * A raw (TCP) backend to one of Node's sockets, for a first head HAProxy does not parse itself: the
 * PROXY header names the visitor and carries why (`unique-id`: malformed, repeated, late).
 */
function rawBackend(name: string, socket: string): string {
  return `
backend ${name}
  mode tcp
  timeout server ${TUNNEL_TIMEOUT}
  server ${name} unix@${socket} send-proxy-v2 proxy-v2-options unique-id
`;
}

/** Another backend to one of Node's sockets, as `node`; `apps`: its errors are Slipway's pages. */
function nodeBackend(name: string, socket: string, page: (name: string) => string, apps = true): string {
  return `
backend ${name}
  timeout server ${TUNNEL_TIMEOUT}
  http-reuse never
${nodeErrors(page, apps)}
  server ${name} unix@${socket} send-proxy-v2
`;
}

/** HAProxy's answers when Node cannot answer (restarting, gone): JSON for the API host, pages for app hosts. */
function nodeErrors(page: (name: string) => string, apps: boolean): string {
  return [502, 503, 504]
    .map((status) =>
      apps
        ? `  http-error status ${status} content-type "text/html; charset=utf-8" lf-file ${page(`node-${status}.html`)} hdr cache-control no-store`
        : `  http-error status ${status} content-type "application/json; charset=utf-8" file ${page(`node-${status}.json`)} hdr cache-control no-store`,
    )
    .join('\n');
}

/** Marker replaced by the log-format expression of the requested host in error bodies. */
const HOST_MARK = '\u0000host\u0000';

/**
 * The bodies of HAProxy's own answers: for app hosts, as log-format files, the Node plane's pages
 * (src/proxy/pages.ts) with the host filled in per request (a map key, or a Host header cut down
 * to DNS-name characters); for what is not yet a request (400, 408) and for the API host when Node
 * cannot answer, {error, message} JSON.
 */
export function errorPageFiles(): Record<string, string> {
  const asLogFormat = (page: Page, variable = 'txn.host'): string => renderPage(page).replaceAll('%', '%%').replaceAll(HOST_MARK, `%[var(${variable})]`);
  const json = (error: string, message: string): string => JSON.stringify({ error, message });
  // An errorfile is a whole HTTP response.
  const response = (status: number, reason: string, body: string): string =>
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`;
  return {
    '502.html': asLogFormat(badGatewayPage(HOST_MARK)),
    // HAProxy calls a refused connection 503; it leaves as the Node plane's 502 (see the apps backend).
    '503.html': asLogFormat(badGatewayPage(HOST_MARK)),
    '504.html': asLogFormat(gatewayTimeoutPage(HOST_MARK)),
    // The same bodies as Node's parser refusals (src/api/socket-errors.ts).
    '400.http': response(400, 'Bad Request', json('validation_error', 'malformed HTTP request')),
    '408.http': response(408, 'Request Timeout', json('validation_error', 'the request did not arrive in time')),
    // Node itself cannot answer (restarting): the API host's JSON, an app host's page (its host sanitised to a DNS name).
    'node-502.json': json('internal_error', 'The server could not answer; try again shortly.'),
    'node-503.json': json('unavailable', 'The server is restarting; try again shortly.'),
    'node-504.json': json('internal_error', 'The server did not answer in time.'),
    'node-502.html': asLogFormat(badGatewayPage(HOST_MARK), 'txn.apphost'),
    'node-503.html': asLogFormat(unavailablePage(HOST_MARK, 'Slipway is restarting; try again shortly'), 'txn.apphost'),
    'node-504.html': asLogFormat(gatewayTimeoutPage(HOST_MARK), 'txn.apphost'),
  };
}

/** The host map file: one `<host>/<i> <server>` line per replica of a live host. */
export function renderHostMap(hosts: ReadonlyMap<string, readonly string[]>): string {
  return [...hosts].flatMap(([host, servers]) => servers.map((server, i) => `${host}/${i} ${server}\n`)).join('');
}

/** The count map file: one `<host> <n>` line per live host. */
export function renderCountMap(hosts: ReadonlyMap<string, readonly string[]>): string {
  return [...hosts].map(([host, servers]) => `${host} ${servers.length}\n`).join('');
}
