// The HTTP API as a Fastify app: public routes beside one authenticated scope. No listen() here.
import fastify, { type FastifyInstance } from 'fastify';
import multipart from '@fastify/multipart';
import swagger from '@fastify/swagger';
import type { Config } from '../config.js';
import type { DeploymentCatalog } from '../domain/deployment-catalog.js';
import type { BuildLogs } from '../deploy/build-logs.js';
import type { KeyUsage } from '../domain/key-usage.js';
import type { ApiKeyStore } from '../domain/api-keys.js';
import type { AccountStore } from '../domain/account-store.js';
import type { AuditLog } from '../domain/audit.js';
import type { TeamStore } from '../domain/teams.js';
import type { ListCursors } from './list-pages.js';
import type { SecretSeal } from '../domain/two-factor.js';
import type { FailureLimiter } from '../domain/rate-limiter.js';
import type { BranchTip, WebhookStore } from '../domain/webhook-store.js';
import type { PreviewCatalog } from '../domain/previews.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { DeploymentOperations } from '../domain/operations.js';
import type { InstanceRegistry } from '../domain/instances.js';
import type { SharedUploads } from '../domain/uploads.js';
import type { NodeDirectory } from '../domain/nodes.js';
import type { CustomDomainStore, DomainCertificates, HostRoutes } from '../domain/custom-domains.js';
import type { SourceStore } from '../source/source-store.js';
import { installErrorHandlers, sendError, type ErrorLog } from './errors.js';
import { DomainError } from '../core/errors.js';
import { registerAuthentication } from './authenticate.js';
import { SHARED_SCHEMAS } from './schemas.js';
import { authRoutes, logoutRoutes } from './routes/auth-routes.js';
import { userRoutes } from './routes/user-routes.js';
import { quotaRoutes } from './routes/quota-routes.js';
import type { QuotaGuard } from '../domain/quotas.js';
import { apiKeyRoutes } from './routes/api-key-routes.js';
import { deploymentRoutes } from './routes/deployment-routes.js';
import { buildRoutes } from './routes/build-routes.js';
import { envRoutes } from './routes/env-routes.js';
import { domainRoutes } from './routes/domain-routes.js';
import { webhookRoutes } from './routes/webhook-routes.js';
import { previewRoutes } from './routes/preview-routes.js';
import { hookRoutes } from './routes/hook-routes.js';
import { tunnelRoutes, type TunnelDirectory } from './routes/tunnel-routes.js';
import { healthRoutes, type HealthCheck } from './routes/health-routes.js';
import { dashboardRoutes } from './routes/dashboard-routes.js';
import { instanceRoutes } from './routes/instance-routes.js';
import { nodeRoutes } from './routes/node-routes.js';
import { teamRoutes } from './routes/team-routes.js';
import { twoFactorRoutes } from './routes/two-factor-routes.js';
import { deploymentMetricsRoutes, serverMetricsRoutes } from './routes/metrics-routes.js';

/** Everything the API needs, wired once in main.ts. */
export interface ApiDeps {
  readonly config: Config;
  /** Deployments and builds as the API reads them; deployments' create and edit. */
  readonly deployments: DeploymentCatalog;
  readonly store: SourceStore;
  readonly buildLogs: BuildLogs;
  readonly loginLimiter: FailureLimiter;
  /** Teams and their members. */
  readonly teams: TeamStore;
  /** The audit log's reads (entries are appended by the stores). */
  readonly audit: AuditLog;
  /** Users and sessions, and the credential reads of authentication. */
  readonly accounts: AccountStore;
  /** API keys' records (create, list, revoke). */
  readonly apiKeys: ApiKeyStore;
  /** API key use (`last_used_at`), coalesced. */
  readonly keyUsage: KeyUsage;
  /** Seals and opens the cursors of paged lists. */
  readonly cursors: ListCursors;
  /** The installation key's cipher: seals two-factor secrets at rest. */
  readonly seal: SecretSeal;
  readonly operations: DeploymentOperations;
  /** Deployments' environment variables (encrypted at rest by the store). */
  readonly configs: AppConfigStore;
  /** Deployments' webhook secrets (encrypted at rest by the store) and the deliveries they received. */
  readonly webhooks: WebhookStore;
  /** Deployments' previews (decisions §17): deployment rows linked to their parent. */
  readonly previews: PreviewCatalog;
  /** Deliveries failing the signature check, per deployment's webhook (sliding window); signed ones never count. */
  readonly hookLimiter: FailureLimiter;
  /** Per-user quotas (deployments, builds in progress, stored upload bytes, API keys). */
  readonly quotas: QuotaGuard;
  /** The tip of a branch (or of the default branch) in a repository (git ls-remote), checked for every push. */
  readonly branchTip: BranchTip;
  readonly tunnels: TunnelDirectory;
  /** Deployments' custom domains. */
  readonly domains: CustomDomainStore;
  /** Where custom domains are routed (the routing table). */
  readonly hosts: HostRoutes;
  /** Custom domains' certificates (NO_CERTIFICATES while HTTPS is off). */
  readonly certificates: DomainCertificates;
  readonly health: HealthCheck;
  /** Uploads kept in the database for every instance (set with several instances on PostgreSQL). */
  readonly sharedUploads?: SharedUploads | undefined;
  /** The control-plane instances sharing the database (GET /api/v1/instances). */
  readonly instances: InstanceRegistry;
  /** The nodes apps run on (GET /api/v1/nodes, drain, activate). */
  readonly nodes: NodeDirectory;
  /** Seconds between two samples of the apps' metrics history (default 10). */
  readonly metricsIntervalSeconds?: number;
  /** The server's Prometheus text (GET /metrics). */
  readonly metrics: { render(): string | Promise<string> };
  /** Where internal errors are logged with their detail; default: Fastify's logger (off unless enabled). */
  readonly log?: ErrorLog;
}

/** Builds the Fastify app (routes, validation, errors, OpenAPI). The caller decides how it listens. */
export async function buildApp(deps: ApiDeps, options: { logger?: boolean | object; serverFactory?: never } = {}): Promise<FastifyInstance> {
  const app = fastify({
    logger: options.logger ?? false,
    trustProxy: false,
    bodyLimit: 1024 * 1024,
    // Reject unknown fields instead of silently dropping them; never coerce types (a number is not a
    // password). Query strings are therefore validated as strings (see schemas.ts).
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: true, allErrors: true } },
    // A long path id still reaches its route (and the authentication hook) and answers 404 as a non-UUID.
    routerOptions: { maxParamLength: 1024 },
    // The router's own errors (bad percent-encoding, over-long parameters) get the {error, message} shape too.
    frameworkErrors: (err, request, reply) => {
      sendError(reply, err, request, deps.log);
    },
  });
  installErrorHandlers(app, deps.log);
  // JSON is the only text body: a text/plain body on a JSON endpoint is the wrong media type (415), not a bad body.
  app.removeContentTypeParser('text/plain');
  // An empty body labelled JSON (some clients label every POST) is no body, not malformed JSON; routes
  // that need a body still refuse it by their schema. Everything else goes to Fastify's safe parser.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '') done(null, undefined);
    else parseJson(request, text, done);
  });
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Slipway API', version: '1.0.0', description: 'Deployments, builds, users, API keys and tunnels.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'session token or API key (slw_k1_…)' } } },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json['$id'] ?? `def-${i}`) },
  });
  await app.register(multipart, {
    limits: { fileSize: deps.config.maxUploadBytes + 1, files: 2, fields: 4, fieldSize: 1024 * 1024, parts: 6, headerPairs: 100 },
  });

  // Multipart bodies are for routes that declare them (the upload); elsewhere they are the wrong media type.
  app.addHook('preValidation', async (request) => {
    if (request.isMultipart() && !(request.routeOptions.schema?.consumes ?? []).includes('multipart/form-data')) {
      throw new DomainError('unsupported_media_type', 'this endpoint takes a JSON body (Content-Type: application/json)');
    }
  });

  app.get('/api/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  await app.register(healthRoutes, { health: deps.health });
  await app.register(dashboardRoutes);
  await app.register(authRoutes(deps), { prefix: '/api/v1' });
  // Git hosts deliver here with a signature instead of a bearer; the route keeps bodies as raw bytes.
  await app.register(hookRoutes(deps), { prefix: '/api/v1' });

  // Everything below requires a bearer credential, checked by one hook.
  await app.register(async (scope) => {
    registerAuthentication(scope, deps.accounts, deps.keyUsage);
    await scope.register(logoutRoutes(deps));
    await scope.register(userRoutes(deps));
    await scope.register(quotaRoutes(deps));
    await scope.register(apiKeyRoutes(deps));
    await scope.register(deploymentRoutes(deps));
    await scope.register(buildRoutes(deps));
    await scope.register(envRoutes(deps));
    await scope.register(domainRoutes(deps));
    await scope.register(webhookRoutes(deps));
    await scope.register(previewRoutes(deps));
    await scope.register(tunnelRoutes(deps));
    await scope.register(deploymentMetricsRoutes(deps));
    await scope.register(instanceRoutes(deps));
    await scope.register(nodeRoutes(deps));
    await scope.register(teamRoutes(deps));
    await scope.register(twoFactorRoutes(deps));
  }, { prefix: '/api/v1' });
  // GET /metrics sits beside the API (where scrapers look), behind the same bearer check.
  await app.register(async (scope) => {
    registerAuthentication(scope, deps.accounts, deps.keyUsage);
    await scope.register(serverMetricsRoutes(deps));
  });

  return app;
}
