// HAProxy's configuration, error bodies and host map, rendered from Slipway's settings and the routes of the moment.
import type { EdgeLimits } from '../../config.js';
import { badGatewayPage, gatewayTimeoutPage, renderPage, type Page } from '../pages.js';

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
}

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

frontend public
  bind ${bind}
${tls === undefined ? '' : `  bind ${tlsBind} ssl crt-list ${files.crtList} strict-sni alpn http/1.1
`}  maxconn ${limits.maxConnections}
  tcp-request connection track-sc0 src table per_address
  tcp-request connection reject if { sc0_conn_cur(per_address) gt ${limits.maxConnectionsPerAddress} }
  # Client-address headers are never taken from the visitor; each backend sets its own.
  http-request del-header x-forwarded-for
  http-request del-header x-forwarded-proto
  http-request del-header x-forwarded-host
  http-request del-header forwarded
  http-request del-header x-real-ip
  # Only an unambiguous request (one Host, an origin-form target) may take the fast path; anything
  # else goes to the Node process, which refuses it exactly as the Node plane does. ACME HTTP-01
  # challenges are Node's whatever the host.
  http-request set-var(txn.host) req.hdr(host),field(1,:),lower if ${fastCondition}{ req.hdr_cnt(host) eq 1 } { url -m beg / } !{ path_beg /.well-known/acme-challenge/ }
  # A live host has n servers (one per replica): the replica map names each as "<host>/<i>"; one is
  # picked at random per request.
  http-request set-var(txn.replicas) var(txn.host),map_str_int(${files.countMap}) if { var(txn.host) -m found }
  http-request set-var(txn.replica) rand,mod(txn.replicas) if { var(txn.replicas) -m found }
  http-request set-var(txn.server) var(txn.host),concat(/,txn.replica),map(${files.hostMap}) if { var(txn.replica) -m found }
  use_backend ${APPS_BACKEND} if { var(txn.server) -m found }
${tls === undefined ? '' : `  # Requests that came over TLS reach Node on its own port: it must not redirect them to https again.
  use_backend node_tls if { ssl_fc }
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
  # A Unix socket in HAProxy's private directory: cheaper per request than a loopback TCP hop (the
  # tunnel's raw pipe crosses it twice per request), and no other local user can reach it to forge
  # a PROXY header.
  server node unix@${files.nodeSocket} send-proxy-v2
${
  tls === undefined
    ? ''
    : `
backend node_tls
  timeout server ${TUNNEL_TIMEOUT}
  http-reuse never
  server node_tls unix@${files.nodeTlsSocket} send-proxy-v2
`
}`;
}

/** Marker replaced by the log-format expression of the requested host in error bodies. */
const HOST_MARK = '\u0000host\u0000';

/**
 * The bodies of HAProxy's own answers for app hosts, as log-format files: the Node plane's pages
 * (src/proxy/pages.ts) with the host filled in per request (a map key, so a DNS name). Requests
 * HAProxy's parser refuses (two Host headers, broken framing) get its built-in 400 page: in 2.6 the
 * HTTP/1 parser answers those before any rule or errorfile applies.
 */
export function errorPageFiles(): Record<string, string> {
  const asLogFormat = (page: Page): string => renderPage(page).replaceAll('%', '%%').replaceAll(HOST_MARK, '%[var(txn.host)]');
  return {
    '502.html': asLogFormat(badGatewayPage(HOST_MARK)),
    // HAProxy calls a refused connection 503; it leaves as the Node plane's 502 (see the apps backend).
    '503.html': asLogFormat(badGatewayPage(HOST_MARK)),
    '504.html': asLogFormat(gatewayTimeoutPage(HOST_MARK)),
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
