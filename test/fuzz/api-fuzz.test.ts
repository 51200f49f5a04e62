// Fuzz suite: seeded random requests to every route of the OpenAPI document, the dashboard, the tunnel upgrade and app hosts through the router, against a real server; fails on any 5xx, hang, crash, leak or malformed error.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait } from '../helpers/apps.js';
import { loginAs, startTestServer, type TestServer } from '../helpers/server.js';
import { imageRepositoryPrefix } from '../../src/deploy/images.js';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { LABEL_INSTANCE } from '../../src/runtime/engine.js';
import { Rng } from './fuzz-random.js';
import { operationsOf, type Operation } from './openapi-shapes.js';
import { sendRaw, type RawResponse } from '../helpers/raw-http.js';
import {
  planApiRequest,
  planAppHostRequest,
  planStaticRequest,
  planTunnelRequest,
  planUnknownPath,
  type FuzzUser,
  type FuzzWorld,
  type Plan,
} from './request-plans.js';

/** SLIPWAY_FUZZ_SEED: the run's seed (printed); SLIPWAY_FUZZ_COUNT: how many requests; SLIPWAY_FUZZ_SECONDS: a time cap on the random phase. */
const SEED = envNumber('SLIPWAY_FUZZ_SEED', 0x51a1e) >>> 0;
const COUNT = envNumber('SLIPWAY_FUZZ_COUNT', 2000);
const SECONDS = envNumber('SLIPWAY_FUZZ_SECONDS', 35);
/** SLIPWAY_FUZZ_DATA_PLANE: the fuzz server's data plane (`node`, the test default, or `haproxy`). */
const DATA_PLANE = process.env['SLIPWAY_FUZZ_DATA_PLANE'] === 'haproxy' ? 'haproxy' : 'node';
/** Engine-heavy requests (deploy, restart, rollback on an own deployment) allowed in one run. */
const HEAVY_BUDGET = envNumber('SLIPWAY_FUZZ_HEAVY', 10);

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value)) throw new Error(`${name} must be a number, got "${raw}"`);
  return value;
}

/** A stack frame as V8 prints it. */
const STACK_FRAME = /\n\s+at [^\n]*[:(]/;

interface Finding {
  readonly index: number;
  readonly shape: string;
  readonly problem: string;
  readonly request: string;
}

/** Everything wrong with one answer (empty: fine). */
function judge(plan: Plan, res: RawResponse, secrets: readonly string[]): string[] {
  const problems: string[] = [];
  if (res.outcome === 'timeout') return [`no answer within ${plan.timeoutMs} ms (hang)`];
  if (res.bodyTimedOut) problems.push(`the body did not end within ${plan.timeoutMs} ms (hang)`);
  if (res.outcome === 'closed') return plan.mayClose ? [] : ['the connection closed without an answer'];
  const text = res.body.toString('utf8');
  if (res.status >= 500 && !plan.allowedServerErrors.includes(res.status)) problems.push(`answered ${res.status}`);
  if (STACK_FRAME.test(text)) problems.push('the body carries a stack trace');
  if (text.includes('internal_error')) problems.push('the body is an internal_error');
  for (const secret of secrets) if (text.includes(secret)) problems.push('the body carries a secret (a password, an API key or a secret environment value)');
  // The API's errors are `{error, message}` JSON; the data plane's own pages are HTML and the app's answers are its own.
  const apiError = plan.kind !== 'app-host' && res.status >= 400 && !plan.headOnly;
  if (apiError) {
    const type = res.headers['content-type']?.[0] ?? '';
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const keys = typeof body === 'object' && body !== null ? Object.keys(body).sort().join(',') : '';
    const record = body as Record<string, unknown> | undefined;
    if (!type.startsWith('application/json') || keys !== 'error,message' || typeof record?.['error'] !== 'string' || typeof record['message'] !== 'string') {
      problems.push(`error ${res.status} is not {error, message} JSON (${type || 'no content-type'}: ${JSON.stringify(text.slice(0, 120))})`);
    }
    // A webhook delivery's credential is its signature: its 401 must not ask for a bearer (hook-routes.ts).
    const hook = plan.request.target.startsWith('/api/v1/hooks/');
    const challenge = res.headers['www-authenticate']?.[0];
    if (res.status === 401 && hook && challenge !== undefined) problems.push(`a webhook 401 asks for credentials (WWW-Authenticate: ${challenge})`);
    if (res.status === 401 && !hook && !/^Bearer\b/.test(challenge ?? '')) problems.push('401 without WWW-Authenticate: Bearer');
  }
  return problems;
}

/** What the request looked like, for the report (head and the start of the body). */
function describeRequest(plan: Plan): string {
  const head = `${plan.request.method} ${plan.request.target.slice(0, 200)} ${plan.request.headers.map(([n, v]) => `${n}: ${v.slice(0, 60)}`).join(' | ')}`;
  const body = plan.request.body === undefined ? '' : ` body(${plan.request.body.length}): ${JSON.stringify(plan.request.body.subarray(0, 160).toString('utf8'))}`;
  return `${head}${body}`;
}

/** The JSON body a request sent, when it was plain JSON. */
function sentJson(plan: Plan): unknown {
  try {
    return JSON.parse(plan.request.body?.toString('utf8') ?? '');
  } catch {
    return undefined;
  }
}

/** Files objects the fuzzer created into the pools, so later requests reach them. */
function harvest(world: FuzzWorld, plan: Plan, res: RawResponse, secrets: string[]): void {
  if (res.outcome !== 'response' || plan.op === undefined || res.status >= 300) return;
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(res.body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return;
  }
  const owner = plan.owner === 'a' ? 'own' : 'other';
  const { method, path } = plan.op;
  if (method === 'POST' && path === '/api/v1/deployments' && typeof json['id'] === 'string') {
    world.deployments[owner].push(json['id']);
    if (typeof json['subdomain'] === 'string') world.otherSubdomains.push(json['subdomain']);
  } else if (method === 'POST' && path === '/api/v1/api-keys') {
    const key = json['api_key'] as { id?: unknown } | undefined;
    if (typeof key?.id === 'string') world.apiKeys[owner].push(key.id);
    // A full key is shown once, at its creation: any later answer carrying it is a leak.
    if (typeof json['key'] === 'string') secrets.push(json['key']);
  } else if (method === 'POST' && path.endsWith('/domains') && typeof json['id'] === 'string') {
    world.domains[owner].push(json['id']);
    if (typeof json['hostname'] === 'string') world.hostnames.push(json['hostname']);
  } else if (method === 'POST' && path.endsWith('/deploy') && typeof json['id'] === 'string') {
    world.builds[owner].push(json['id']);
  } else if (method === 'PUT' && path === '/api/v1/users/me/password' && res.status === 200) {
    // The change went through: the new password is now the known one.
    const sent = sentJson(plan) as { new_password?: unknown } | undefined;
    if (typeof sent?.new_password === 'string') world.c.password = sent.new_password;
  } else if (method === 'POST' && path === '/api/v1/auth/login' && typeof json['token'] === 'string') {
    const sent = sentJson(plan) as { email?: unknown } | undefined;
    if (sent?.email === world.a.email) world.spareSessions.push(json['token']);
  }
}

/** Counts of what was sent and answered, and every finding. */
class Tally {
  sent = 0;
  readonly shapes = new Set<string>();
  /** method + route + body kind + auth kind (a shape's first four parts). */
  readonly coarseShapes = new Set<string>();
  readonly operations = new Set<string>();
  readonly findings: Finding[] = [];
  readonly #byKind = new Map<string, number>();
  readonly #byAnswer = new Map<string, number>();
  readonly #allowedServerErrors = new Map<string, number>();
  #serverErrors = 0;
  #hangs = 0;
  #closes = 0;
  #cutStreams = 0;

  constructor(readonly secrets: string[]) {}

  record(index: number, plan: Plan, res: RawResponse): void {
    this.sent += 1;
    this.shapes.add(plan.shape);
    this.coarseShapes.add(plan.shape.split(' ').slice(0, 4).join(' '));
    if (plan.op !== undefined) this.operations.add(`${plan.op.method} ${plan.op.path}`);
    bump(this.#byKind, plan.kind);
    bump(this.#byAnswer, res.outcome === 'response' ? `${Math.floor(res.status / 100)}xx` : res.outcome);
    if (res.outcome === 'response' && res.status >= 500) {
      if (plan.allowedServerErrors.includes(res.status)) bump(this.#allowedServerErrors, `${res.status} ${plan.kind === 'app-host' ? (plan.shape.split(' ')[1] ?? plan.kind) : plan.kind}`);
      else this.#serverErrors += 1;
    }
    if (res.outcome === 'timeout' || res.bodyTimedOut) this.#hangs += 1;
    if (res.outcome === 'closed') this.#closes += 1;
    if (res.cutShort) this.#cutStreams += 1;
    for (const problem of judge(plan, res, this.secrets)) {
      const answer = res.outcome === 'response' ? ` [${res.status}: ${JSON.stringify(res.body.subarray(0, 200).toString('utf8'))}]` : '';
      this.findings.push({ index, shape: plan.shape, problem: `${problem}${answer}`, request: describeRequest(plan) });
    }
  }

  lines(): string[] {
    const list = (map: Map<string, number>): string => [...map].sort().map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
    const allowed = [...this.#allowedServerErrors.values()].reduce((a, b) => a + b, 0);
    return [
      `[fuzz] by target: ${list(this.#byKind)}`,
      `[fuzz] by answer: ${list(this.#byAnswer)}`,
      `[fuzz] 5xx (not allowed): ${this.#serverErrors}; allowed 5xx: ${allowed} (${list(this.#allowedServerErrors)}); hangs: ${this.#hangs}; ` +
        `closed without answer (the body fell short of its declared length): ${this.#closes}; streams cut by the client: ${this.#cutStreams}; findings: ${this.findings.length}`,
    ];
  }
}

function bump(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

describe('API fuzz', () => {
  let ts: TestServer;
  let world: FuzzWorld;
  let operations: Operation[];
  const crashes: string[] = [];
  const current = { index: -1, shape: 'setup' };
  const onCrash = (err: unknown): void => {
    crashes.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
    // The stack says where in the server it escaped (for the test log only).
    console.log(`[fuzz] crash during request #${current.index} (${current.shape}): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  };

  before(async () => {
    process.on('uncaughtException', onCrash);
    process.on('unhandledRejection', onCrash);
    // A short body idle timeout, so the stalled bodies the fuzzer sends are closed within its per-request timeout.
    ts = await startTestServer({
      SLIPWAY_STARTUP_TIMEOUT_SECONDS: '10',
      SLIPWAY_BUILD_TIMEOUT_SECONDS: '60',
      SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS: '2',
      SLIPWAY_DATA_PLANE: DATA_PLANE,
    });
    const [a, b, c] = await Promise.all([ts.newUser('fuzz-a'), ts.newUser('fuzz-b'), ts.newUser('fuzz-c')]);
    const asUser = (u: typeof a): FuzzUser => ({ email: u.email, password: u.password, token: u.token, apiKey: u.apiKey });
    // Running apps: a's (the fuzzer may stop, restart, roll back and redeploy it) and b's (another tenant's, and the router's target).
    const { archive } = await busyboxArchive({ body: 'fuzz target\n' });
    const [appA, appB] = await Promise.all([createArchiveApp(ts, a.token, archive), createArchiveApp(ts, b.token, archive)]);
    const [deployA, deployB] = await Promise.all([deployAndWait(ts, a.token, appA.id), deployAndWait(ts, b.token, appB.id)]);
    assert.equal(deployA.status, 200, deployA.text);
    assert.equal(deployB.status, 200, deployB.text);
    const spareSessions = await Promise.all([1, 2, 3, 4, 5, 6].map(() => loginAs(ts.url, a.email, a.password)));
    const revokedToken = await loginAs(ts.url, a.email, a.password);
    assert.equal((await ts.request('POST', '/api/v1/auth/logout', { token: revokedToken })).status, 204);
    const bKeys = await ts.request('GET', '/api/v1/api-keys', { token: b.token });
    // Another tenant's custom domain: its id must answer 404 to the fuzzer, its host reaches b's app.
    const bDomain = await ts.request('POST', `/api/v1/deployments/${appB.id}/domains`, { token: b.token, body: { hostname: `fz-b-${process.pid}.example.test` } });
    assert.equal(bDomain.status, 201, bDomain.text);
    world = {
      port: ts.port,
      a: asUser(a),
      b: asUser(b),
      c: asUser(c),
      adminToken: ts.adminToken,
      spareSessions,
      revokedToken,
      deployments: { own: [appA.id], other: [appB.id] },
      builds: { own: [deployA.json.id as string], other: [deployB.json.id as string] },
      apiKeys: { own: [], other: (bKeys.json as { id: string }[]).map((k) => k.id) },
      domains: { own: [], other: [bDomain.json.id as string] },
      hostnames: [bDomain.json.hostname as string],
      protectedIds: new Set([appA.id]),
      liveSubdomains: [appB.subdomain, appA.subdomain],
      otherSubdomains: [],
      heavyBudget: HEAVY_BUDGET,
    };
    const doc = await ts.request('GET', '/api/v1/openapi.json');
    operations = operationsOf(doc.json);
  });

  after(async () => {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
    if (ts === undefined) return;
    await ts.close();
    fs.rmSync(ts.dataDir, { recursive: true, force: true });
    // Whatever the fuzzer made the engine create (containers, volumes, networks, images) is gone.
    const engine = createDockerEngine();
    const labels = { [LABEL_INSTANCE]: ts.server.instanceId };
    const prefix = imageRepositoryPrefix(ts.server.instanceId);
    const left = [
      ...(await engine.listContainers(labels)).map((c) => `container ${c.id}`),
      ...(await engine.listVolumes(labels)).map((v) => `volume ${v.name}`),
      ...(await engine.listNetworks(labels)).map((n) => `network ${n.name}`),
      ...(await engine.listImages({})).flatMap((i) => i.tags.filter((t) => t.startsWith(prefix)).map((t) => `image ${t}`)),
    ];
    assert.deepEqual(left, [], 'the fuzz server left nothing on the engine');
  });

  test(`random requests (seed ${SEED}, SLIPWAY_FUZZ_SEED / SLIPWAY_FUZZ_COUNT to change): no 5xx, hang, crash, leak or malformed error`, async (t) => {
    console.log(`[fuzz] seed ${SEED} (SLIPWAY_FUZZ_SEED=${SEED} reproduces), count ${COUNT}, time cap ${SECONDS} s, ${operations.length} OpenAPI operations, ${DATA_PLANE} data plane`);
    assert.ok(operations.length >= 20, `the OpenAPI document lists ${operations.length} operations`);
    const secrets = [world.a.apiKey, world.b.apiKey, world.c.apiKey, world.a.password, world.b.password];
    const tally = new Tally(secrets);
    let bursts = 0;
    const slowest: { ms: number; shape: string }[] = [];
    const started = Date.now();
    const deadline = started + SECONDS * 1000;

    for (let i = 0; i < COUNT; i++) {
      // The first pass asks every operation once, validly; then each request draws from a PRNG of its own (seed, index).
      const rng = new Rng((SEED ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0);
      const firstPass = i < operations.length;
      if (!firstPass && Date.now() > deadline) break;
      let plan: Plan;
      if (firstPass) {
        plan = planApiRequest(rng, world, operations[i]!, true);
      } else {
        const kind = rng.weighted({ api: 68, static: 5, 'unknown-path': 3, tunnel: 9, 'app-host': 15 });
        plan =
          kind === 'api' ? planApiRequest(rng, world, rng.pick(operations), false) :
          kind === 'static' ? planStaticRequest(rng, world) :
          kind === 'unknown-path' ? planUnknownPath(rng, world) :
          kind === 'tunnel' ? planTunnelRequest(rng, world) :
          planAppHostRequest(rng, world);
      }
      // Now and then the same request four times at once: races on one object (the same subdomain
      // created twice, one id deleted twice, one spare session logged out twice…).
      const burst = !firstPass && plan.kind === 'api' && !plan.heavy && rng.chance(0.08);
      const options = { timeoutMs: plan.timeoutMs, streamCutMs: 1500 };
      current.index = i;
      current.shape = plan.shape;
      const sentAt = Date.now();
      const answers = burst
        ? await Promise.all([1, 2, 3, 4].map(() => sendRaw(ts.port, plan.request, options, plan.headOnly)))
        : [await sendRaw(ts.port, plan.request, options, plan.headOnly)];
      if (burst) bursts += 1;
      slowest.push({ ms: Date.now() - sentAt, shape: plan.shape });
      slowest.sort((x, y) => y.ms - x.ms).splice(5);
      // A value set as a secret may not appear in any answer, not even the one to the request that set it.
      tally.secrets.push(...plan.newSecrets);
      for (const res of answers) {
        tally.record(i, plan, res);
        harvest(world, plan, res, tally.secrets);
      }
    }

    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const summary = [
      `[fuzz] ${tally.sent} requests in ${seconds} s (${bursts} bursts of 4 identical requests at once); distinct shapes: ${tally.coarseShapes.size} by method + route + body kind + auth kind, ${tally.shapes.size} with the params/query/header twists`,
      ...tally.lines(),
      `[fuzz] slowest: ${slowest.map((x) => `${x.ms} ms ${x.shape}`).join('; ')}`,
      `[fuzz] engine-heavy budget left: ${world.heavyBudget}; crashes / unhandled rejections: ${crashes.length}`,
    ];
    for (const line of summary) {
      console.log(line);
      t.diagnostic(line);
    }
    const targetB = await ts.request('GET', `/api/v1/deployments/${world.deployments.other[0]}`, { token: world.b.token });
    console.log(`[fuzz] b's app (the router's target) is now ${String(targetB.json?.status)}; live build ${String(targetB.json?.live_build_id)}`);
    const findings = tally.findings;
    for (const f of findings.slice(0, 25)) console.log(`[fuzz] #${f.index} ${f.shape}: ${f.problem}\n        ${f.request.slice(0, 600)}`);

    const covered = new Set(tally.operations);
    const missing = operations.map((op) => `${op.method} ${op.path}`).filter((key) => !covered.has(key));
    assert.deepEqual(missing, [], 'every OpenAPI operation was requested');
    assert.deepEqual(crashes, [], 'no uncaught exception or unhandled rejection');
    assert.deepEqual(findings.map((f) => `#${f.index} ${f.shape}: ${f.problem}`), [], `seed ${SEED}: every answer is bounded, below 500, leak-free and well-formed`);
  });

  test('the server still answers /healthz after the fuzzing', async () => {
    const res = await ts.request('GET', '/healthz');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.status, 'ok');
    assert.deepEqual(crashes, [], 'no uncaught exception or unhandled rejection');
  });
});
