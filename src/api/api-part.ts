// The API part: the Fastify app over the use-cases, its health check and its limiters, ready to route requests.
import type { FastifyInstance } from 'fastify';
import type { Part } from '../core/parts.js';
import type { Coordination } from '../deploy/coordination.js';
import { sharedFailureLimiter } from '../deploy/shared-limiter.js';
import { branchTip } from '../source/git.js';
import type { ApiDeps } from './api-deps.js';
import { buildApp } from './app.js';
import { ListCursors, type CursorSeal } from './list-pages.js';
import type { HealthCheck } from './routes/health-routes.js';

export interface ApiPartDeps extends Omit<ApiDeps, 'health' | 'cursors' | 'seal' | 'loginLimiter' | 'hookLimiter' | 'branchTip' | 'metricsIntervalSeconds'> {
  /** The installation key's cipher: cursors and two-factor secrets are sealed with it. */
  readonly cipher: CursorSeal;
  /** Failures are counted across every instance (decisions §15): each change is announced on the feed. */
  readonly coordination: Coordination;
  readonly self: string;
  /** Environment base for git children (PATH, HOME). */
  readonly gitEnv: Record<string, string>;
  readonly checks: HealthChecks;
  /** Resolves once the HAProxy plane applied the routing table's last change (undefined: no HAProxy in front now). */
  settled(): Promise<void> | undefined;
}

/** What GET /api/v1/health looks at. */
export interface HealthChecks {
  pingDatabase(): Promise<void>;
  /** Why coordination cannot work now, or undefined when it does. */
  coordinationProblem(): string | undefined;
  pingEngine(signal: AbortSignal): Promise<{ version: string }>;
  /** Apps being started again by recovery now. */
  recovering(): number;
}

/** Builds the app (no listener: the edge routes requests to it) and closes it at stop. */
export async function apiPart(deps: ApiPartDeps): Promise<Part<FastifyInstance>> {
  const { cipher, coordination, self, gitEnv, checks, settled, config, ...rest } = deps;
  const app = await buildApp({
    ...rest,
    config,
    // Cursors are sealed with the installation key: they survive restarts, not a key rotation.
    cursors: new ListCursors(cipher),
    seal: cipher,
    // 10 failures per account; an address gets more room, since many users may share it (NAT).
    loginLimiter: sharedFailureLimiter('login', { maxFailures: 10, maxFailuresByKind: { ip: 100 }, windowMs: 15 * 60_000 }, coordination, self),
    // 60 badly signed deliveries a minute per webhook, then 429; correctly signed ones are never limited (§10).
    hookLimiter: sharedFailureLimiter('hook', { maxFailures: 60, windowMs: 60_000 }, coordination, self),
    metricsIntervalSeconds: config.metricsIntervalMs / 1000,
    branchTip: (repoUrl, branch) => branchTip(repoUrl, branch, { allowPrivate: config.allowPrivateGit, timeoutMs: 60_000, signal: AbortSignal.timeout(60_000), gitEnv }),
    health: healthCheck(checks),
  });
  // A change the API made to the routing table (deploy, stop, domains…) is answered only once the
  // HAProxy plane has applied it, so the caller's next request through the edge already sees it.
  app.addHook('onSend', async (request, _reply, payload) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') await settled();
    return payload;
  });
  await app.ready();
  return { offers: app, stop: () => app.close() };
}

function healthCheck(checks: HealthChecks): HealthCheck {
  return async () => {
    const results: Record<string, { ok: boolean; detail?: string }> = {};
    try {
      await checks.pingDatabase();
      const problem = checks.coordinationProblem();
      results['database'] = problem === undefined ? { ok: true } : { ok: false, detail: problem };
    } catch (err) {
      results['database'] = { ok: false, detail: err instanceof Error ? err.message : 'unreachable' };
    }
    try {
      const version = await checks.pingEngine(AbortSignal.timeout(3000));
      results['docker'] = { ok: true, detail: `engine ${version.version}` };
    } catch {
      results['docker'] = { ok: false, detail: 'the Docker engine does not answer' };
    }
    // Recovery never makes the server unhealthy: it serves meanwhile (apps answer 503 `starting`).
    const recovering = checks.recovering();
    results['recovery'] = { ok: true, detail: recovering === 0 ? 'done' : `recovering: ${recovering} app(s) starting again` };
    return { ok: Object.values(results).every((c) => c.ok), checks: results };
  };
}
