// Routes: log in (public; a bearer token, or the dashboard's session cookie), the dashboard's session, and log out.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { getCurrentUser, loginUser, logoutUser, recordFailedLogin } from '../../domain/accounts.js';
import { checkLoginOtp } from '../../domain/two-factor.js';
import { DomainError } from '../../core/errors.js';
import { twoFactorDeps } from './two-factor-routes.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { noStore } from '../no-store.js';
import { DashboardSessionResponse, LoginBody, LoginResponse, errorResponses } from '../schemas.js';
import { clearedSessionCookies, csrfTokenFor, readSessionCookie, secureCookies, sessionCookie } from '../session-cookie.js';

export const authRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const twoFactor = twoFactorDeps(deps);
    /** A login of either kind: the password, then the second factor (decisions §18); every failure is in the audit log. */
    const logIn = async (request: FastifyRequest<{ Body: LoginBody }>): ReturnType<typeof loginUser> => {
      const input = { email: request.body.email, password: request.body.password, otp: request.body.otp, clientIp: request.ip };
      try {
        return await loginUser(
          { accounts: deps.accounts, sessionTtlMs: deps.config.sessionTtlMs, loginLimiter: deps.loginLimiter, secondFactor: (user, otp) => checkLoginOtp(twoFactor, user, otp) },
          input,
        );
      } catch (err) {
        // Every refused login is an entry: wrong credentials (401) and attempts the limiter refused
        // before any check (429) alike; never the password or code.
        if (err instanceof DomainError && (err.code === 'invalid_credentials' || err.code === 'rate_limited')) await recordFailedLogin(deps.accounts, input);
        throw err;
      }
    };

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
        return logIn(request);
      },
    );

    app.post<{ Body: LoginBody }>(
      '/auth/session',
      {
        schema: {
          tags: ['auth'],
          summary: "The dashboard's login: the session is kept in an HttpOnly, SameSite=Strict cookie shared by the browser's tabs",
          security: [],
          body: LoginBody,
          response: { 200: DashboardSessionResponse, ...errorResponses(400, 401, 429) },
        },
      },
      async (request, reply) => {
        noStore(reply);
        const login = await logIn(request);
        void reply.header('Set-Cookie', sessionCookie(login.token, login.expires_at, secureCookies(request, deps.config.publicUrl)));
        return { user: login.user, expires_at: login.expires_at, csrf_token: csrfTokenFor(login.token) };
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
        await logoutUser(deps.accounts, principalOf(request));
        if (readSessionCookie(request) !== undefined) void reply.header('Set-Cookie', clearedSessionCookies(secureCookies(request, deps.config.publicUrl)));
        return reply.code(204).send();
      },
    );

    app.get(
      '/auth/session',
      {
        schema: {
          tags: ['auth'],
          summary: "The signed-in user and, for the dashboard's cookie, its CSRF token (a new tab asks here)",
          response: { 200: DashboardSessionResponse, ...errorResponses(401) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const cookie = request.headers.authorization === undefined ? readSessionCookie(request) : undefined;
        noStore(reply);
        return { user: await getCurrentUser(deps.accounts, principal), csrf_token: cookie === undefined ? null : csrfTokenFor(cookie) };
      },
    );
  };
