// The HTTP API as a Fastify app: public routes beside one authenticated scope. No listen() here.
import fastify, { type FastifyInstance } from 'fastify';
import multipart from '@fastify/multipart';
import swagger from '@fastify/swagger';
import { installErrorHandlers, sendError } from './errors.js';
import { DomainError } from '../core/errors.js';
import { registerAuthentication } from './authenticate.js';
import { SHARED_SCHEMAS } from './schemas.js';
import { authRoutes, logoutRoutes } from './routes/auth-routes.js';
import { userRoutes } from './routes/user-routes.js';
import { quotaRoutes } from './routes/quota-routes.js';
import { limitRoutes } from './routes/limit-routes.js';
import { apiKeyRoutes } from './routes/api-key-routes.js';
import { deploymentRoutes } from './routes/deployment-routes.js';
import { buildRoutes } from './routes/build-routes.js';
import { envRoutes } from './routes/env-routes.js';
import { domainRoutes } from './routes/domain-routes.js';
import { webhookRoutes } from './routes/webhook-routes.js';
import { previewRoutes } from './routes/preview-routes.js';
import { hookRoutes } from './routes/hook-routes.js';
import { tunnelRoutes } from './routes/tunnel-routes.js';
import { healthRoutes } from './routes/health-routes.js';
import { dashboardRoutes } from './routes/dashboard-routes.js';
import { instanceRoutes } from './routes/instance-routes.js';
import { nodeRoutes } from './routes/node-routes.js';
import { teamRoutes } from './routes/team-routes.js';
import { twoFactorRoutes } from './routes/two-factor-routes.js';
import { databaseRoutes } from './routes/database-routes.js';
import { backupRoutes, backupScheduleHooks } from './routes/backup-routes.js';
import { jobRoutes } from './routes/job-routes.js';
import { notificationRoutes } from './routes/notification-routes.js';
import { deploymentMetricsRoutes, serverMetricsRoutes } from './routes/metrics-routes.js';
import { releaseServicesRoutes } from './routes/services-routes.js';

import type { ApiDeps } from './api-deps.js';

export type { ApiDeps };

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
    await scope.register(limitRoutes(deps));
    await scope.register(apiKeyRoutes(deps));
    await scope.register(deploymentRoutes(deps));
    await scope.register(buildRoutes(deps));
    await scope.register(envRoutes(deps));
    await scope.register(domainRoutes(deps));
    await scope.register(webhookRoutes(deps));
    await scope.register(previewRoutes(deps));
    await scope.register(tunnelRoutes(deps));
    await scope.register(deploymentMetricsRoutes(deps));
    await scope.register(releaseServicesRoutes(deps));
    await scope.register(instanceRoutes(deps));
    await scope.register(nodeRoutes(deps));
    await scope.register(teamRoutes(deps));
    await scope.register(twoFactorRoutes(deps));
    if (deps.databases !== undefined) await scope.register(databaseRoutes(deps.databases, deps.cursors, deps.backups === undefined ? undefined : backupScheduleHooks(deps.backups)));
    if (deps.backups !== undefined) await scope.register(backupRoutes(deps.backups, deps.cursors));
    if (deps.jobs !== undefined) await scope.register(jobRoutes(deps.jobs, deps.cursors));
    if (deps.notifications !== undefined) await scope.register(notificationRoutes(deps.notifications, deps.cursors));
  }, { prefix: '/api/v1' });
  // GET /metrics sits beside the API (where scrapers look), behind the same bearer check.
  await app.register(async (scope) => {
    registerAuthentication(scope, deps.accounts, deps.keyUsage);
    await scope.register(serverMetricsRoutes(deps));
  });

  return app;
}
