// Routes: the current user, password change, and user creation by administrators.
import type { FastifyPluginAsync } from 'fastify';
import { changePassword, createUser, getCurrentUser } from '../../domain/accounts.js';
import type { ApiDeps } from '../app.js';
import { principalOf } from '../authenticate.js';
import { ChangePasswordBody, CreateUserBody, MessageSchema, errorResponses } from '../schemas.js';
import { Type } from '@sinclair/typebox';

export const userRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/users/me',
      { schema: { tags: ['users'], summary: 'The current user', response: { 200: Type.Ref('User'), ...errorResponses(401) } } },
      async (request) => getCurrentUser(deps.accounts, principalOf(request)),
    );

    app.put<{ Body: ChangePasswordBody }>(
      '/users/me/password',
      {
        schema: {
          tags: ['users'],
          summary: 'Change the password (revokes the other sessions)',
          body: ChangePasswordBody,
          response: { 200: MessageSchema, ...errorResponses(400, 401, 429) },
        },
      },
      async (request) => {
        await changePassword(deps.accounts, principalOf(request), request.body, deps.loginLimiter);
        return { message: 'password updated' };
      },
    );

    app.post<{ Body: CreateUserBody }>(
      '/users',
      {
        schema: {
          tags: ['users'],
          summary: 'Create a user (administrators only)',
          body: CreateUserBody,
          response: { 201: Type.Ref('User'), ...errorResponses(400, 401, 403) },
        },
      },
      async (request, reply) => reply.code(201).send(await createUser(deps.accounts, principalOf(request), request.body)),
    );
  };
