// The fuzzer's request generators: one planned request (bytes, shape label, what answers are allowed) per call, for the API, static files, tunnels and app hosts.
import crypto from 'node:crypto';
import { makeTarGz } from '../helpers/tar-fixtures.js';
import { anyJson, HOSTILE_STRINGS, malformedJson, type Rng } from './fuzz-random.js';
import { almostValidObject, hostileValue, validObject, type Operation, type Schema } from './openapi-shapes.js';
import type { RawRequest } from '../helpers/raw-http.js';

/** A user the fuzzer acts as. */
export interface FuzzUser {
  readonly email: string;
  password: string;
  readonly token: string;
  readonly apiKey: string;
}

/** What the generators know about the server under test; pools grow as the fuzzer creates objects. */
export interface FuzzWorld {
  readonly port: number;
  /** The caller (owns the pools' `own` ids). */
  readonly a: FuzzUser;
  /** Another tenant: its ids must answer 404 to `a`. */
  readonly b: FuzzUser;
  /** The user whose password the fuzzer may change (so `a`'s sessions survive). */
  readonly c: FuzzUser;
  readonly adminToken: string;
  /** Session tokens of `a` that logout may spend. */
  readonly spareSessions: string[];
  readonly revokedToken: string;
  readonly deployments: { own: string[]; other: string[] };
  readonly builds: { own: string[]; other: string[] };
  readonly apiKeys: { own: string[]; other: string[] };
  readonly domains: { own: string[]; other: string[] };
  /** Custom domains the fuzzer added (app hosts too). */
  readonly hostnames: string[];
  /** Deployments that must survive (the running targets). */
  readonly protectedIds: ReadonlySet<string>;
  /** Subdomains with a running app, and others the fuzzer created. */
  readonly liveSubdomains: readonly string[];
  readonly otherSubdomains: string[];
  /** Engine-heavy requests (deploy, restart, rollback, a valid upload) still allowed on an own deployment. */
  heavyBudget: number;
}

export type TargetKind = 'api' | 'static' | 'unknown-path' | 'tunnel' | 'app-host';
export type AuthKind = 'none' | 'session' | 'api-key' | 'admin' | 'other-user' | 'garbage' | 'revoked' | 'duplicate';

/** One request to send, with the label it is counted under and the rules its answer is judged by. */
export interface Plan {
  readonly kind: TargetKind;
  /** method + route + body kind + auth kind (+ header twist): counted as distinct shapes. */
  readonly shape: string;
  readonly request: RawRequest;
  readonly op?: Operation;
  readonly headOnly: boolean;
  readonly timeoutMs: number;
  /** The server may close without answering (the body ended at EOF, CONNECT). */
  readonly mayClose: boolean;
  /** 5xx statuses that are a correct answer here (the data plane's 502/503/504, build_failed on deploy?wait). */
  readonly allowedServerErrors: readonly number[];
  /** It makes the engine build or start something (deploy, restart, rollback on an own deployment). */
  readonly heavy: boolean;
  /** Environment values this request sets as secrets (write-only: never in any answer, this one included). */
  readonly newSecrets: readonly string[];
  /** The auth used, to file created objects under the right owner. */
  readonly owner: 'a' | 'other' | 'none';
}

const REPO_URLS = ['http://127.0.0.1:1/nothing.git', 'file:///nonexistent/slipway-fuzz.git', 'http://localhost:1/x.git', 'https://127.0.0.1:1/r.git'];
const RESERVED_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];
const ODD_METHODS = ['TRACE', 'PROPFIND', 'M-SEARCH', 'FOO', 'get', 'PURGE', 'LINK', 'CONNECT'];

/** A tiny source: builds at once, and its container cannot start (no image layers, no such command). */
export const SCRATCH_SOURCE = makeTarGz([{ path: 'Dockerfile', content: 'FROM scratch\nCMD ["/nonexistent"]\n' }]);

/** Every environment value the fuzzer sends starts so: set as a secret, it must never come back in any answer. */
export const SECRET_MARK = 'fzval-';

let uniqueCounter = 0;
const unique = (prefix: string): string => `${prefix}${process.pid.toString(36)}${(++uniqueCounter).toString(36)}`;

/** Percent-encodes a path segment; strings that cannot be encoded (lone surrogates) go raw. */
function encodeSegment(rng: Rng, value: string): string {
  if (rng.chance(0.15) && /^[\x21-\x7e]+$/.test(value) && !value.includes('?') && !value.includes('#')) return value;
  try {
    return encodeURIComponent(value);
  } catch {
    return Buffer.from(value, 'utf8').toString('hex');
  }
}

function query(pairs: readonly (readonly [string, string])[]): string {
  if (pairs.length === 0) return '';
  return `?${pairs.map(([k, v]) => `${k}${v === '\0' ? '' : `=${v}`}`).join('&')}`;
}

/** Authorization header lines for an auth kind. */
function authHeaders(rng: Rng, world: FuzzWorld, auth: AuthKind, op: Operation | undefined): [string, string][] {
  // A password change revokes the caller's other sessions: the fuzzer does it as `c`, never as `a`.
  const user = op?.path === '/api/v1/users/me/password' ? world.c : world.a;
  const bearer = (value: string): [string, string][] => [['Authorization', `Bearer ${value}`]];
  const isLogout = op?.path === '/api/v1/auth/logout';
  switch (auth) {
    case 'none':
      return [];
    case 'session':
      // Logging out spends a spare session; a's main session must keep working.
      if (isLogout) return bearer(world.spareSessions.pop() ?? world.revokedToken);
      return bearer(user.token);
    case 'api-key':
      return bearer(user.apiKey);
    case 'admin':
      return bearer(isLogout ? world.revokedToken : world.adminToken);
    case 'other-user':
      // c owns nothing: every id of a or b must answer 404 to it (b's own key would stop b's app, the router's target).
      return bearer(world.c.apiKey);
    case 'revoked':
      return bearer(world.revokedToken);
    case 'duplicate':
      return [...bearer(rng.chance(0.5) ? world.a.token : 'garbage'), ...bearer(rng.chance(0.5) ? world.a.apiKey : world.b.apiKey)];
    case 'garbage':
      return [['Authorization', rng.pick([
        'Bearer',
        'Bearer ',
        'Bearer x',
        `Bearer slw_k1_${rng.chars(40, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789')}`,
        `Bearer ${world.a.apiKey.slice(0, -1)}`,
        `Bearer ${world.a.token}x`,
        `Bearer  ${world.a.token}`,
        `bearer ${world.a.token}`,
        `BEARER ${world.a.apiKey}`,
        world.a.token,
        `Basic ${Buffer.from(`${world.a.email}:${world.a.password}`).toString('base64')}`,
        `Bearer ${'A'.repeat(8000)}`,
        `Bearer ${world.a.token.toUpperCase()}`,
        'Token abc',
        `Bearer ${rng.uuid()}`,
        'Bearer \u00ff\u00fe',
        `Bearer ${world.a.token}, Bearer ${world.b.apiKey}`,
      ])]];
  }
}

/** The ids a path parameter names. */
function poolFor(world: FuzzWorld, op: Operation, name: string): { own: string[]; other: string[] } {
  if (name === 'build_id') return world.builds;
  if (name === 'domain_id') return world.domains;
  return op.path.startsWith('/api/v1/api-keys') ? world.apiKeys : world.deployments;
}

/** A path parameter: own, another tenant's, random, or hostile. */
function pathParam(rng: Rng, world: FuzzWorld, op: Operation, name: string, forDelete: boolean): { value: string; label: string } {
  const pool = poolFor(world, op, name);
  const roll = rng.weighted({ own: 45, other: 15, random: 12, hostile: 28 });
  if (roll === 'own') {
    const own = forDelete && pool === world.deployments ? pool.own.filter((id) => !world.protectedIds.has(id)) : pool.own;
    if (own.length > 0) return { value: rng.pick(own), label: 'own' };
  }
  if (roll === 'other' && pool.other.length > 0) return { value: rng.pick(pool.other), label: 'other' };
  if (roll === 'hostile') {
    const base = rng.pick(pool.own.length > 0 ? pool.own : [rng.uuid()]);
    const value = rng.pick([
      () => rng.pick(HOSTILE_STRINGS),
      () => base.toUpperCase(),
      () => `{${base}}`,
      () => base.replaceAll('-', ''),
      () => `${base} `,
      () => `${base}/../${rng.uuid()}`,
      () => base.slice(0, -1),
      () => `${base}${base}`,
      () => '0'.repeat(rng.pick([1, 36, 1024, 1025, 3000])),
      () => '00000000-0000-0000-0000-000000000000',
      () => String(rng.int(-5, 99999)),
    ])();
    return { value, label: 'hostile' };
  }
  return { value: rng.uuid(), label: 'random' };
}

/** The query string: valid values, duplicates, arrays, unknown names, hostile values. */
function queryFor(rng: Rng, op: Operation): { text: string; label: string } {
  const pairs: [string, string][] = [];
  let label = 'none';
  for (const [name, schema] of Object.entries(op.query)) {
    if (!rng.chance(0.6)) continue;
    label = 'valid';
    const valid = schema.pattern !== undefined ? String(rng.int(0, 500)) : rng.pick(['true', 'false', '1', '0']);
    pairs.push([name, valid]);
  }
  if (rng.chance(0.35)) {
    const name = rng.pick([...Object.keys(op.query), 'limit', 'cursor', 'x', '__proto__[polluted]', 'constructor']);
    label = rng.pick(['duplicate', 'array', 'unknown', 'hostile', 'empty']);
    switch (label) {
      case 'duplicate':
        pairs.push([name, 'true'], [name, 'false']);
        break;
      case 'array':
        pairs.push([`${name}[]`, 'true'], [`${name}[0]`, '1']);
        break;
      case 'unknown':
        pairs.push([rng.pick(['limit', 'cursor', 'debug', 'admin', 'x']), rng.pick(['1', '-1', '99999999999', 'zz', ''])]);
        break;
      case 'hostile':
        pairs.push([name, encodeSegment(rng, String(rng.pick(HOSTILE_STRINGS)))]);
        break;
      default:
        pairs.push([name, '\0']);
    }
  }
  return { text: query(pairs), label };
}

/** Field values that make sense for the running server (existing users, loopback repositories…). */
function knownValue(rng: Rng, world: FuzzWorld, op: Operation, field: string): unknown {
  switch (field) {
    case 'email':
      if (op.path === '/api/v1/auth/login') return rng.pick([world.c.email, world.a.email, `nobody-${rng.chars(6)}@test.local`, world.c.email.toUpperCase()]);
      return `${unique('fz-')}@test.local`;
    case 'password':
      if (op.path === '/api/v1/auth/login') return rng.pick([world.c.password, world.c.password, 'wrong-password', '']);
      return `pw-${rng.chars(12)}`;
    case 'current_password':
      return rng.pick([world.c.password, world.c.password, 'not-the-password']);
    case 'new_password':
      return `new-${rng.chars(rng.int(4, 20))}`;
    case 'name':
      return rng.pick(['fuzz app', 'k', `fz ${rng.chars(5)}`]);
    case 'subdomain':
      return rng.chance(0.9) ? unique('fz-') : rng.pick(world.liveSubdomains);
    case 'repo_url':
      return rng.pick(REPO_URLS);
    case 'branch':
      return rng.pick(['main', 'master', 'feature/x', 'v1.0', null]);
    case 'dockerfile_path':
      return rng.pick(['Dockerfile', 'docker/Dockerfile', 'sub/dir/Containerfile']);
    case 'health_check_path':
      return rng.pick(['/', '/health', '/index.html?x=1', null]);
    case 'memory_mb':
      return rng.pick([64, 128, 512, 2048, null]);
    case 'cpus':
      return rng.pick([0.25, 0.5, 1, 2, null]);
    case 'build_id':
      return rng.pick([...world.builds.own, ...world.builds.own, ...world.builds.other, rng.uuid()]);
    case 'vars': {
      // Environment variables: valid keys mostly, some reserved or malformed; values marked so a leak is recognisable.
      const vars: Record<string, string | null> = {};
      for (let n = rng.int(1, 4); n > 0; n--) {
        const key = rng.chance(0.8) ? `FZ_${rng.chars(6, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789')}` : rng.pick(['PORT', 'SLIPWAY_X', '1BAD', 'bad-key', '', 'K'.repeat(257), 'é', '__proto__']);
        vars[key] = rng.chance(0.15) ? null : rng.chance(0.8) ? `${SECRET_MARK}${rng.chars(16)}` : rng.pick(['', 'nul\u0000value', 'v'.repeat(33 * 1024), '$(id)']);
      }
      return vars;
    }
    case 'secret':
      return rng.chance(0.6);
    case 'hostname':
      return rng.chance(0.7) ? `${unique('fz-')}.example.test` : rng.pick([...world.hostnames, 'localhost', 'x.localhost', '127.0.0.1', 'bücher.example.test', 'single', `${'l'.repeat(64)}.example.test`]);
    case 'volumes':
      return rng.pick([[], [{ name: 'data', mount_path: '/data' }], [{ name: 'cache', mount_path: '/var/cache/app' }, { name: 'logs', mount_path: '/logs' }]]);
    default:
      return undefined;
  }
}

/** Never lets a fuzzed repo_url name a host outside loopback (a create resolves it): a value not from the pool loses its ':' and '@'. */
function keepRepoUrlLocal(body: unknown): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
  const record = body as Record<string, unknown>;
  const url = record['repo_url'];
  if (typeof url === 'string' && !REPO_URLS.includes(url)) record['repo_url'] = url.replaceAll(/[:@]/g, '');
}

/** A coherent create body: archive, or git with a loopback repository. */
function validCreateDeployment(rng: Rng, world: FuzzWorld, op: Operation): Record<string, unknown> {
  const known = (f: string) => knownValue(rng, world, op, f);
  const body: Record<string, unknown> = { name: known('name'), subdomain: known('subdomain') };
  if (rng.chance(0.5)) {
    body['source_type'] = 'archive';
  } else {
    if (rng.chance(0.5)) body['source_type'] = 'git';
    body['repo_url'] = known('repo_url');
    if (rng.chance(0.4)) body['branch'] = rng.pick(['main', 'dev']);
  }
  if (rng.chance(0.3)) body['dockerfile_path'] = known('dockerfile_path');
  if (rng.chance(0.2)) body['memory_mb'] = rng.pick([64, 256]);
  if (rng.chance(0.2)) body['cpus'] = rng.pick([0.5, 1]);
  return body;
}

type BodyKind = 'valid' | 'almost' | 'hostile-field' | 'hostile-root' | 'malformed' | 'empty' | 'none' | 'wrong-ctype' | 'oversize' | 'cl-short' | 'cl-long-eof' | 'cl-long-open' | 'chunked' | 'cl-and-te' | 'encoded';

/** The body of a JSON operation (or of one that takes none): the kind, its headers and bytes. */
function jsonBody(rng: Rng, world: FuzzWorld, op: Operation): { kind: string; headers: [string, string][]; request: Partial<RawRequest> } {
  const schema: Schema | undefined = op.body?.kind === 'json' ? op.body.schema : undefined;
  const weights: Record<BodyKind, number> = schema !== undefined
    ? { valid: 30, almost: 22, 'hostile-field': 8, 'hostile-root': 6, malformed: 10, empty: 4, none: 4, 'wrong-ctype': 7, oversize: 2, 'cl-short': 2, 'cl-long-eof': 2, 'cl-long-open': 1, chunked: 3, 'cl-and-te': 2, encoded: 1 }
    : { valid: 0, almost: 0, 'hostile-field': 0, 'hostile-root': 12, malformed: 8, empty: 6, none: 58, 'wrong-ctype': 6, oversize: 1, 'cl-short': 2, 'cl-long-eof': 2, 'cl-long-open': 1, chunked: 4, 'cl-and-te': 1, encoded: 0 };
  const kind = rng.weighted(weights);
  const known = (f: string) => knownValue(rng, world, op, f);
  const json = (value: unknown): Buffer => {
    keepRepoUrlLocal(value);
    return Buffer.from(JSON.stringify(value) ?? 'null');
  };
  const jsonType: [string, string] = ['Content-Type', rng.pick(['application/json', 'application/json', 'application/json; charset=utf-8', 'Application/JSON'])];
  const validBody = (): Buffer =>
    json(op.method === 'POST' && op.path === '/api/v1/deployments' ? validCreateDeployment(rng, world, op) : schema !== undefined ? validObject(rng, schema, known) : {});
  switch (kind) {
    case 'valid':
      return { kind, headers: [jsonType], request: { body: validBody() } };
    case 'almost': {
      const base = op.method === 'POST' && op.path === '/api/v1/deployments' ? validCreateDeployment(rng, world, op) : undefined;
      const { body, mutation } = almostValidObject(rng, schema ?? {}, known);
      return { kind: `almost:${mutation}`, headers: [jsonType], request: { body: json(base !== undefined && mutation !== 'drop-required' ? { ...base, ...body } : body) } };
    }
    case 'hostile-field': {
      const body = validObject(rng, schema ?? {}, known);
      for (const [name, prop] of Object.entries(schema?.properties ?? {})) if (rng.chance(0.5)) body[name] = hostileValue(rng, prop);
      return { kind, headers: [jsonType], request: { body: json(body) } };
    }
    case 'hostile-root':
      return { kind, headers: [jsonType], request: { body: json(rng.pick([[], 'text', 42, null, true, [{}], anyJson(rng)])) } };
    case 'malformed': {
      const bad = malformedJson(rng);
      return { kind: `malformed:${bad.kind}`, headers: [jsonType], request: { body: bad.body } };
    }
    case 'empty':
      return { kind, headers: [jsonType], request: { body: Buffer.alloc(0), contentLength: 0 } };
    case 'none':
      return { kind, headers: [], request: {} };
    case 'wrong-ctype': {
      const type = rng.pick(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=xyz', 'application/xml', 'application/json; charset=utf-16', '', 'application/octet-stream', '*/*', 'application/json, text/plain', 'none']);
      const body = type.startsWith('application/x-www') ? Buffer.from('name=x&subdomain=y') : validBody();
      return { kind: `wrong-ctype:${type.split(/[;,]/)[0] || 'blank'}`, headers: type === 'none' ? [] : [['Content-Type', type]], request: { body } };
    }
    case 'oversize':
      return { kind, headers: [jsonType], request: { body: Buffer.from(JSON.stringify({ name: 'o'.repeat(1024 * 1024 + rng.int(1, 5000)) })) } };
    case 'cl-short': {
      // The declared length ends inside the body: the rest arrives as a second, garbage request on the same connection.
      const body = validBody();
      return { kind, headers: [jsonType], request: { body, contentLength: Math.max(0, body.length - rng.int(1, 5)) } };
    }
    case 'cl-long-eof': {
      // The declared length is longer than what is sent, then the client closes its side.
      const body = validBody();
      return { kind, headers: [jsonType], request: { body, contentLength: body.length + rng.int(1, 1000), halfClose: true } };
    }
    case 'cl-long-open': {
      // The declared length is longer than what is sent and the client waits: the body idle timeout must close it.
      const body = validBody();
      return { kind, headers: [jsonType], request: { body, contentLength: body.length + rng.int(1, 1000) } };
    }
    case 'chunked': {
      const body = validBody();
      const cut = rng.int(0, body.length);
      const chunks = [body.subarray(0, cut), body.subarray(cut)].filter((c) => c.length > 0);
      const wire = Buffer.concat([...chunks.map((c) => Buffer.concat([Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')])), Buffer.from('0\r\n\r\n')]);
      return { kind, headers: [jsonType, ['Transfer-Encoding', 'chunked']], request: { body: wire, contentLength: 'none' } };
    }
    case 'cl-and-te': {
      const body = validBody();
      return { kind, headers: [jsonType, ['Transfer-Encoding', 'chunked']], request: { body, contentLength: body.length } };
    }
    case 'encoded':
      return { kind, headers: [jsonType, ['Content-Encoding', rng.pick(['gzip', 'br', 'identity', 'x-unknown'])]], request: { body: validBody() } };
  }
}

/** The multipart body of an upload: valid, broken in one way, or hostile. */
function multipartBody(rng: Rng, ownTarget: boolean, forceValid: boolean): { kind: string; headers: [string, string][]; request: Partial<RawRequest>; heavy: boolean } {
  const boundary = `fz${crypto.randomBytes(8).toString('hex')}`;
  const part = (name: string, content: Buffer | string, filename?: string, type?: string): Buffer =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"${filename === undefined ? '' : `; filename="${filename}"`}\r\n${type === undefined ? '' : `Content-Type: ${type}\r\n`}\r\n`),
      Buffer.isBuffer(content) ? content : Buffer.from(content),
      Buffer.from('\r\n'),
    ]);
  const end = Buffer.from(`--${boundary}--\r\n`);
  const type: [string, string] = ['Content-Type', `multipart/form-data; boundary=${boundary}`];
  const archive = (content: Buffer) => part('archive', content, 'source.tar.gz', 'application/gzip');
  const kind = forceValid ? 'valid' : rng.weighted({
    valid: 16, 'junk-gz': 8, 'not-gzip': 6, traversal: 8, 'no-archive': 7, 'extra-parts': 6, 'hostile-dockerfile': 8, 'bad-boundary': 7, 'no-boundary': 5,
    json: 7, 'truncated-eof': 6, 'big-field': 3, empty: 5, 'hostile-names': 6, 'two-archives': 4,
    // Issue 8's stuck upload (finding 4): answered 400 or closed by the body idle timeout.
    'unterminated-big-field': 6,
  });
  const heavy = kind === 'valid' && ownTarget;
  const simple = (...parts: Buffer[]) => ({ kind, headers: [type], request: { body: Buffer.concat([...parts, end]) }, heavy });
  switch (kind) {
    case 'valid':
      return simple(archive(SCRATCH_SOURCE), ...(rng.chance(0.3) ? [part('dockerfile', 'FROM scratch\nCMD ["/nonexistent"]\n')] : []));
    case 'junk-gz':
      return simple(archive(Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), crypto.randomBytes(rng.int(10, 3000))])));
    case 'not-gzip':
      return simple(archive(Buffer.from(rng.pick(['PK\u0003\u0004 not a tar', 'plain text', '']))));
    case 'traversal':
      return simple(archive(makeTarGz([
        rng.pick([
          { path: '../escape.txt', content: 'x' },
          { path: '/abs/path', content: 'x' },
          { path: 'link', type: 'symlink' as const, linkpath: '../../../../etc/passwd' },
          { path: 'dev', type: 'char' as const },
          { path: 'fifo', type: 'fifo' as const },
          { path: 'hard', type: 'hardlink' as const, linkpath: '/etc/passwd' },
          { path: 'lie', content: 'x', size: 1_000_000_000 },
          { path: `${'d/'.repeat(200)}f`, content: 'deep' },
          { path: 'Dockerfile\u0000.txt', content: 'x' },
        ]),
      ])));
    case 'no-archive':
      return simple(part('dockerfile', 'FROM scratch\n'));
    case 'extra-parts':
      return simple(archive(SCRATCH_SOURCE), ...Array.from({ length: rng.int(3, 9) }, (_, i) => part(`extra${i}`, 'v')));
    case 'hostile-dockerfile':
      return simple(archive(SCRATCH_SOURCE), part('dockerfile', rng.pick([String(rng.pick(HOSTILE_STRINGS)), 'FROM 127.0.0.1:1/x\n', 'FROM scratch\nADD http://127.0.0.1:1/x /x\n', '\u0000'.repeat(100), 'FROM']), rng.chance(0.3) ? 'Dockerfile' : undefined));
    case 'bad-boundary':
      return { kind, headers: [['Content-Type', `multipart/form-data; boundary=other${boundary}`]], request: { body: Buffer.concat([archive(SCRATCH_SOURCE), end]) }, heavy: false };
    case 'no-boundary':
      return { kind, headers: [['Content-Type', rng.pick(['multipart/form-data', 'multipart/form-data; boundary=', 'multipart/mixed; boundary=x'])]], request: { body: Buffer.concat([archive(SCRATCH_SOURCE), end]) }, heavy: false };
    case 'json':
      return { kind, headers: [['Content-Type', 'application/json']], request: { body: Buffer.from('{"archive": "H4sI"}') }, heavy: false };
    case 'truncated-eof':
      // The body stops inside the archive part and the client closes its side: the server may just close.
      return { kind, headers: [type], request: { body: archive(SCRATCH_SOURCE).subarray(0, rng.int(10, 120)), halfClose: true, contentLength: 'none' }, heavy: false };
    case 'unterminated-big-field':
      // Issue 8's stuck upload, as sent: a file part, `dockerfile` as a file, a text field over 1 MiB,
      // no closing boundary, the connection left open. The oversized field must be refused at once.
      return {
        kind,
        headers: [type],
        request: (() => {
          const body = Buffer.concat([archive(SCRATCH_SOURCE), part('dockerfile', 'FROM scratch\n', 'Dockerfile', 'text/plain'), part('note', 'N'.repeat(1024 * 1024 + 100))]);
          // The declared length promises more than is sent: the server cannot wait for the end.
          return { body, contentLength: body.length + 4096 };
        })(),
        heavy: false,
      };
    case 'big-field':
      return simple(archive(SCRATCH_SOURCE), part('dockerfile', 'F'.repeat(1024 * 1024 + 10)));
    case 'empty':
      return simple();
    case 'hostile-names':
      return simple(part(rng.pick(['archive"; filename="../../x', '\u00ff\u00fe', '', 'a'.repeat(500)]), SCRATCH_SOURCE, rng.pick(['../../etc/passwd', '', '\u0000.tgz', undefined])));
    default:
      return simple(archive(SCRATCH_SOURCE), archive(SCRATCH_SOURCE));
  }
}

/** Extra or odd headers (kept under Node's 16 KiB header limit except on purpose). */
function headerTwist(rng: Rng): { label: string; headers: [string, string][] } {
  if (!rng.chance(0.3)) return { label: '', headers: [] };
  const twist = rng.pick([
    'dup-ctype', 'big-header', 'oversized-headers', 'many-headers', 'xff', 'odd-host', 'expect', 'accept', 'unicode-value', 'cookie', 'range', 'te-gzip', 'hop-by-hop',
  ] as const);
  const headers: [string, string][] = ((): [string, string][] => {
    switch (twist) {
      case 'dup-ctype':
        return [['Content-Type', 'application/json'], ['Content-Type', 'text/plain']];
      case 'big-header':
        return [['X-Big', 'b'.repeat(8000)]];
      case 'oversized-headers':
        return [['X-Huge', 'h'.repeat(20_000)]];
      case 'many-headers':
        return Array.from({ length: 300 }, (_, i) => [`X-H${i}`, String(i)] as [string, string]);
      case 'xff':
        return [['X-Forwarded-For', '1.2.3.4, 127.0.0.1'], ['X-Real-IP', '10.0.0.1'], ['Forwarded', 'for=evil;host=api.localhost']];
      case 'odd-host':
        return [['X-Forwarded-Host', 'evil.example'], ['X-Original-URL', '/api/v1/users']];
      case 'expect':
        return [['Expect', rng.pick(['100-continue', 'garbage'])]];
      case 'accept':
        return [['Accept', rng.pick(['application/xml', 'text/html', '*/*;q=0', ''])], ['Accept-Encoding', rng.pick(['gzip', 'br, deflate', 'x'.repeat(100)])]];
      case 'unicode-value':
        return [['X-Unicode', 'héllo ☃ 😀']];
      case 'cookie':
        return [['Cookie', `session=${'c'.repeat(3000)}; __proto__=x`]];
      case 'range':
        return [['Range', rng.pick(['bytes=0-0', 'bytes=999999-', 'bytes=-1,0-'])], ['If-None-Match', '*'], ['If-Modified-Since', 'garbage']];
      case 'te-gzip':
        return [['TE', 'trailers'], ['Upgrade', 'h2c'], ['HTTP2-Settings', 'AAMAAABkAAQAAP__']];
      case 'hop-by-hop':
        return [['Connection', 'keep-alive, X-Drop'], ['X-Drop', '1'], ['Keep-Alive', 'timeout=1000']];
    }
  })();
  return { label: twist, headers };
}

const API_TIMEOUT_MS = 20_000;
const HEAVY_TIMEOUT_MS = 90_000;

/** The body is shorter than its declared length: the server may only close the connection (at EOF or the body idle timeout). */
function bodyFallsShort(request: RawRequest): boolean {
  return typeof request.contentLength === 'number' && request.contentLength > (request.body?.length ?? 0);
}

/** The environment values a JSON body sets as secrets (`{vars, secret: true}`). */
function secretsSent(body: Buffer | undefined): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body?.toString('utf8') ?? '');
  } catch {
    return [];
  }
  const record = parsed as { vars?: unknown; secret?: unknown } | null;
  if (typeof record !== 'object' || record === null || record.secret !== true || typeof record.vars !== 'object' || record.vars === null) return [];
  return Object.values(record.vars).filter((v): v is string => typeof v === 'string' && v.startsWith(SECRET_MARK));
}

/** A request to one operation of the OpenAPI document. `valid`: the first pass, one plain valid request per operation. */
export function planApiRequest(rng: Rng, world: FuzzWorld, op: Operation, valid: boolean): Plan {
  const auth: AuthKind = valid
    ? op.isPublic ? 'none' : op.path === '/api/v1/users' && op.method === 'POST' ? 'admin' : 'session'
    : rng.weighted({ session: 30, 'api-key': 25, none: 8, admin: 7, 'other-user': 8, garbage: 12, revoked: 5, duplicate: 5 });
  let method = op.method;
  let methodLabel = '';
  if (!valid && rng.chance(0.06)) {
    method = rng.pick([...RESERVED_METHODS, ...ODD_METHODS]);
    methodLabel = method === op.method ? '' : `as-${method}`;
  }
  const params: Record<string, string> = {};
  const paramLabels: string[] = [];
  let ownTarget = false;
  for (const name of op.pathParams) {
    const firstOwn = poolFor(world, op, name).own
      .find((id) => op.method !== 'DELETE' || !world.protectedIds.has(id));
    const { value, label } = valid ? { value: firstOwn ?? rng.uuid(), label: firstOwn === undefined ? 'random' : 'own' } : pathParam(rng, world, op, name, op.method === 'DELETE');
    params[name] = encodeSegment(rng, value);
    paramLabels.push(`${name}=${label}`);
    if (name === 'id' && label === 'own' && !op.path.startsWith('/api/v1/api-keys')) ownTarget = true;
  }
  // Engine work (a build, a container start) is bounded: past the budget, own ids become random ones.
  const isHeavy = /\/(deploy|restart|rollback)$/.test(op.path) && ownTarget && (auth === 'session' || auth === 'api-key');
  const body = op.body?.kind === 'multipart' ? multipartBody(rng, ownTarget, valid) : { ...jsonBody(rng, world, op), heavy: false };
  if ((isHeavy || body.heavy) && method === op.method) {
    if (world.heavyBudget <= 0) params['id'] = rng.uuid();
    else world.heavyBudget -= 1;
  }
  const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => params[name] ?? '');
  const q = valid ? { text: '', label: 'none' } : queryFor(rng, op);
  const twist = valid ? { label: '', headers: [] } : headerTwist(rng);
  const waits = /\/deploy$/.test(op.path) && /wait=(true|1)/.test(q.text);
  const headers: [string, string][] = [['Host', `127.0.0.1:${world.port}`], ['Connection', 'close'], ...authHeaders(rng, world, auth, op), ...body.headers, ...twist.headers];
  const request: RawRequest = { method, target: path + q.text, headers, ...body.request };
  return {
    kind: 'api',
    op,
    shape: [method, op.path, `body=${op.body?.kind === 'multipart' ? `mp:${body.kind}` : body.kind}`, `auth=${auth}`, paramLabels.join(','), q.label === 'none' ? '' : `query=${q.label}`, twist.label, methodLabel]
      .filter((s) => s !== '')
      .join(' '),
    request,
    headOnly: method === 'HEAD',
    timeoutMs: isHeavy || body.heavy || waits ? HEAVY_TIMEOUT_MS : API_TIMEOUT_MS,
    mayClose: request.halfClose === true || method === 'CONNECT' || bodyFallsShort(request),
    allowedServerErrors: waits ? [500] : [],
    heavy: isHeavy || body.heavy,
    newSecrets: secretsSent(request.body),
    owner: auth === 'session' || auth === 'api-key' ? 'a' : auth === 'admin' || auth === 'other-user' ? 'other' : 'none',
  };
}

/** The dashboard's files, /healthz, the OpenAPI document and the favicon, asked oddly. */
export function planStaticRequest(rng: Rng, world: FuzzWorld): Plan {
  const path = rng.pick(['/', '/ui/app.js', '/ui/dashboard.css', '/favicon.ico', '/healthz', '/api/v1/openapi.json', '/index.html', '/ui/app.js.map', '/ui/../package.json', '/public/../package.json']);
  const method = rng.weighted({ GET: 60, HEAD: 15, POST: 8, OPTIONS: 5, DELETE: 4, PUT: 4, TRACE: 2, FOO: 2 });
  const q = rng.chance(0.2) ? rng.pick(['?v=1', '?a=1&a=2', '?%zz', `?${'q'.repeat(5000)}`, '?__proto__[x]=1']) : '';
  const twist = headerTwist(rng);
  const body = method === 'POST' || method === 'PUT' ? { headers: [['Content-Type', 'application/json']] as [string, string][], body: Buffer.from('{"x":1}') } : { headers: [] as [string, string][], body: undefined };
  const auth = rng.chance(0.3) ? authHeaders(rng, world, 'garbage', undefined) : [];
  return {
    kind: 'static',
    shape: [method, path, q === '' ? '' : 'query', twist.label, auth.length > 0 ? 'auth=garbage' : ''].filter((s) => s !== '').join(' '),
    request: { method, target: path + q, headers: [['Host', `localhost:${world.port}`], ['Connection', 'close'], ...body.headers, ...auth, ...twist.headers], ...(body.body === undefined ? {} : { body: body.body }) },
    headOnly: method === 'HEAD',
    timeoutMs: API_TIMEOUT_MS,
    mayClose: false,
    allowedServerErrors: [],
    heavy: false,
    newSecrets: [],
    owner: 'none',
  };
}

/** Paths no route serves: traversal, odd prefixes, case, doubled slashes, bad encoding. */
export function planUnknownPath(rng: Rng, world: FuzzWorld): Plan {
  const target = rng.pick([
    '/api/v1/', '/api/v2/deployments', '//api/v1/deployments', '/api/v1/deployments/', '/API/V1/DEPLOYMENTS', '/api/v1/deployments/../users/me',
    '/api/v1/%2e%2e/%2e%2e/etc/passwd', '/../../../etc/passwd', '/api/v1/deployments/%zz', '/api/v1/%00', '/api/v1/deployments;x=1', '*',
    `/api/v1/${'x/'.repeat(2000)}`, '/api/v1/deployments?%', '/api/v1/tunnels/connect', '/api/v1/auth/login/', '/.env', '/.git/config',
    'http://127.0.0.1/api/v1/users/me', '/api/v1/users/me#frag', '/api/v1/deployments/\u00ff',
  ]);
  const method = rng.pick(['GET', 'GET', 'POST', 'DELETE', 'OPTIONS', 'PATCH']);
  const auth = authHeaders(rng, world, rng.pick(['session', 'api-key', 'none', 'garbage'] as const), undefined);
  return {
    kind: 'unknown-path',
    shape: `${method} unknown:${target.slice(0, 40)} auth=${auth.length > 0 ? 'some' : 'none'}`,
    request: { method, target, headers: [['Host', `127.0.0.1:${world.port}`], ['Connection', 'close'], ...auth] },
    headOnly: false,
    timeoutMs: API_TIMEOUT_MS,
    mayClose: false,
    allowedServerErrors: [],
    heavy: false,
    newSecrets: [],
    owner: 'none',
  };
}

/** The tunnel connect endpoint's upgrade: good and bad handshakes, keys and names. */
export function planTunnelRequest(rng: Rng, world: FuzzWorld): Plan {
  const authKind = rng.weighted({ 'api-key': 40, session: 12, garbage: 20, none: 12, 'other-user': 8, revoked: 8 } as Record<AuthKind, number>);
  const subdomain = rng.weighted({ none: 25, fresh: 30, taken: 15, hostile: 20, duplicate: 10 });
  const q =
    subdomain === 'none' ? '' :
    subdomain === 'fresh' ? `?subdomain=${unique('tn-')}` :
    subdomain === 'taken' ? `?subdomain=${rng.pick([...world.liveSubdomains, ...world.otherSubdomains, 'api'])}` :
    subdomain === 'duplicate' ? `?subdomain=${unique('tn-')}&subdomain=${unique('tn-')}` :
    `?subdomain=${encodeSegment(rng, String(rng.pick(HOSTILE_STRINGS)))}`;
  const handshake = rng.weighted({ valid: 55, 'no-upgrade': 10, 'bad-key': 12, 'bad-version': 8, 'no-key': 8, 'post': 7 });
  const headers: [string, string][] = [['Host', `127.0.0.1:${world.port}`]];
  if (handshake !== 'no-upgrade') headers.push(['Upgrade', rng.pick(['websocket', 'websocket', 'WebSocket', 'h2c'])], ['Connection', 'Upgrade']);
  else headers.push(['Connection', 'close']);
  if (handshake !== 'no-key') headers.push(['Sec-WebSocket-Key', handshake === 'bad-key' ? rng.pick(['', 'short', '!!!!', 'x'.repeat(200)]) : crypto.randomBytes(16).toString('base64')]);
  headers.push(['Sec-WebSocket-Version', handshake === 'bad-version' ? rng.pick(['8', '99', 'x', '']) : '13']);
  const auth = authHeaders(rng, world, authKind, undefined);
  return {
    kind: 'tunnel',
    shape: `UPGRADE /api/v1/tunnels/connect auth=${authKind} subdomain=${subdomain} handshake=${handshake}`,
    request: { method: handshake === 'post' ? 'POST' : 'GET', target: `/api/v1/tunnels/connect${q}`, headers: [...headers, ...auth] },
    headOnly: false,
    timeoutMs: API_TIMEOUT_MS,
    mayClose: false,
    allowedServerErrors: [],
    heavy: false,
    newSecrets: [],
    owner: 'none',
  };
}

/** A request to an app host through the router: live, pending, unknown and hostile hosts, any method, odd framing. */
export function planAppHostRequest(rng: Rng, world: FuzzWorld): Plan {
  const hostKind = rng.weighted({ live: 50, created: 10, domain: world.hostnames.length > 0 ? 8 : 0, unknown: 13, hostile: 11, 'two-hosts': 4, 'absolute-form': 4 });
  const port = world.port;
  const live = rng.pick(world.liveSubdomains);
  const host =
    hostKind === 'live' || hostKind === 'two-hosts' || hostKind === 'absolute-form' ? `${live}.localhost:${port}` :
    hostKind === 'created' ? `${rng.pick(world.otherSubdomains.length > 0 ? world.otherSubdomains : [live])}.localhost` :
    hostKind === 'domain' ? rng.pick(world.hostnames) :
    hostKind === 'unknown' ? `${unique('nx-')}.localhost:${port}` :
    rng.pick([`${live.toUpperCase()}.LOCALHOST:${port}`, `${live}.localhost.:${port}`, `${live}.localhost:99999`, `x@${live}.localhost`, `${live}.localhost.evil.example`, `${'a'.repeat(300)}.localhost`, '[::1]', '', `${live}..localhost`, `-${live}.localhost`]);
  // HEAD is left out until the data plane answers it when the app sends a body with its HEAD answer
  // (busybox httpd does on errors): the proxy drops the visitor's connection instead (issue 8, the edge's part).
  const method = rng.weighted({ GET: 45, POST: 12, HEAD: 8, PUT: 5, DELETE: 5, OPTIONS: 5, PATCH: 4, TRACE: 2, PROPFIND: 2, 'M-SEARCH': 2, CONNECT: 2 });
  const path = rng.pick(['/', '/', '/index.html', '/missing', '/../../etc/passwd', '/%2e%2e/%2e%2e/etc/passwd', '/?a=1&a=2', `/${'p'.repeat(6000)}`, '/cgi-bin/x', '/%zz', '/a%00b', '/\u00ff']);
  const framing = rng.weighted({ none: 55, json: 15, chunked: 8, 'cl-short': 5, 'cl-long-eof': 5, 'cl-long-open': 2, upgrade: 7, big: 5 });
  const twist = headerTwist(rng);
  const headers: [string, string][] = [];
  if (hostKind !== 'hostile' || host !== '') headers.push(['Host', host]);
  if (hostKind === 'two-hosts') headers.push(['Host', rng.pick([`${unique('nx-')}.localhost`, '127.0.0.1', `${live}.localhost`])]);
  let request: Partial<RawRequest> = {};
  switch (framing) {
    case 'json':
      headers.push(['Content-Type', 'application/json']);
      request = { body: Buffer.from(JSON.stringify(anyJson(rng))) };
      break;
    case 'chunked':
      headers.push(['Transfer-Encoding', 'chunked']);
      request = { body: Buffer.from('5\r\nhello\r\n0\r\n\r\n'), contentLength: 'none' };
      break;
    case 'cl-short':
      request = { body: Buffer.from('hello world'), contentLength: 5 };
      break;
    case 'cl-long-eof':
      request = { body: Buffer.from('partial'), contentLength: 5000, halfClose: true };
      break;
    case 'cl-long-open':
      request = { body: Buffer.from('partial'), contentLength: 5000 };
      break;
    case 'upgrade':
      headers.push(['Upgrade', 'websocket'], ['Connection', 'Upgrade'], ['Sec-WebSocket-Key', crypto.randomBytes(16).toString('base64')], ['Sec-WebSocket-Version', '13']);
      break;
    case 'big':
      request = { body: crypto.randomBytes(rng.int(100_000, 600_000)) };
      break;
  }
  if (framing !== 'upgrade') headers.push(['Connection', 'close']);
  headers.push(...twist.headers);
  const target = hostKind === 'absolute-form' ? `http://${rng.pick([`${unique('nx-')}.localhost`, '127.0.0.1', `${live}.localhost`])}:${port}${path}` : path;
  return {
    kind: 'app-host',
    shape: [method, `app-host:${hostKind}`, `framing=${framing}`, twist.label].filter((s) => s !== '').join(' '),
    request: { method, target, headers, ...request },
    headOnly: method === 'HEAD',
    timeoutMs: API_TIMEOUT_MS,
    // The app (busybox httpd) may drop odd requests itself; the proxy then closes or answers 502.
    mayClose: request.halfClose === true || method === 'CONNECT' || bodyFallsShort({ method, target, headers, ...request }),
    // The data plane's own answers (and the app's 501 for methods it does not implement).
    allowedServerErrors: [501, 502, 503, 504],
    heavy: false,
    newSecrets: [],
    owner: 'none',
  };
}
