// Routes: two-factor login setup (decisions §18) — start, confirm, state, turn off.
import type { FastifyPluginAsync } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { beginTwoFactor, confirmTwoFactor, disableTwoFactor, twoFactorEnabled, type TwoFactorDeps } from '../../domain/two-factor.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { errorResponses } from '../schemas.js';

const CodeBody = Type.Object({ code: Type.String({ maxLength: 32, description: 'the current 6-digit code' }) }, { additionalProperties: false });

/** What the two-factor use-cases need, from the API's dependencies. */
export function twoFactorDeps(deps: ApiDeps): TwoFactorDeps {
  return { accounts: deps.accounts, seal: deps.seal, limiter: deps.loginLimiter, issuer: `Slipway (${deps.config.domain})`, ...(deps.now === undefined ? {} : { now: deps.now }) };
}

export const twoFactorRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const tf = twoFactorDeps(deps);
    const tags = ['users'];
    app.get(
      '/users/me/2fa',
      { schema: { tags, summary: 'Whether two-factor login is on', response: { 200: Type.Object({ enabled: Type.Boolean() }), ...errorResponses(401) } } },
      async (request) => ({ enabled: await twoFactorEnabled(deps.accounts, principalOf(request).userId) }),
    );
    app.post(
      '/users/me/2fa',
      {
        schema: {
          tags,
          summary: 'Start two-factor setup: a new TOTP secret (and its otpauth:// URL for a QR code), active once confirmed',
          response: { 201: Type.Object({ secret: Type.String(), otpauth_url: Type.String() }), ...errorResponses(401, 409) },
        },
      },
      async (request, reply) => reply.code(201).send(await beginTwoFactor(tf, principalOf(request))),
    );
    app.post<{ Body: Static<typeof CodeBody> }>(
      '/users/me/2fa/confirm',
      {
        schema: {
          tags,
          summary: 'Confirm setup with a current code: from now on login needs `otp` too',
          body: CodeBody,
          response: { 200: Type.Object({ enabled: Type.Boolean() }), ...errorResponses(400, 401, 409, 429) },
        },
      },
      async (request) => confirmTwoFactor(tf, principalOf(request), request.body),
    );
    app.delete<{ Body: Static<typeof CodeBody> }>(
      '/users/me/2fa',
      { schema: { tags, summary: 'Turn two-factor login off (with a current code)', body: CodeBody, response: { 204: { type: 'null' }, ...errorResponses(400, 401, 409, 429) } } },
      async (request, reply) => {
        await disableTwoFactor(tf, principalOf(request), request.body);
        return reply.code(204).send();
      },
    );
  };
