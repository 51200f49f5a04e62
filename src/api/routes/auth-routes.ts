// Routes: log in (public) and log out.
import type { FastifyPluginAsync } from 'fastify';
import { loginUser, logoutUser } from '../../domain/accounts.js';
import type { ApiDeps } from '../app.js';
import { principalOf } from '../authenticate.js';
import { noStore } from '../no-store.js';
import { LoginBody, LoginResponse, errorResponses } from '../schemas.js';

export const authRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.post<{ Body: LoginBody }>(
      '/auth/login',
      {
        schema: {
          tags: ['auth'],
          summary: 'Log in with e-mail and password; returns a session token',
          security: [],
          body: LoginBody,
          response: { 200: LoginResponse, ...errorResponses(400, 401, 429) },
        },
      },
      async (request, reply) => {
        // Failed logins too: nothing about a login attempt is worth keeping.
        noStore(reply);
        return loginUser(
          { db: deps.db, sessionTtlMs: deps.config.sessionTtlMs, loginLimiter: deps.loginLimiter },
          { email: request.body.email, password: request.body.password, clientIp: request.ip },
        );
      },
    );
  };

/** Log out: inside the authenticated scope. */
export const logoutRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.post(
      '/auth/logout',
      { schema: { tags: ['auth'], summary: 'End the current session', response: { 204: { type: 'null' }, ...errorResponses(401) } } },
      async (request, reply) => {
        await logoutUser(deps.db, principalOf(request));
        return reply.code(204).send();
      },
    );
  };
