// Routes: the current user, password change, and the users administrators list, create, reset and disable.
import type { FastifyPluginAsync } from 'fastify';
import { changePassword, createUser, getCurrentUser, listUsers, updateUser } from '../../domain/accounts.js';
import { PageQuery, isTimeIdPosition, listResponse, pageRequest, sendPage, type ListRef } from '../list-pages.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { ChangePasswordBody, CreateUserBody, IdParams, MessageSchema, UpdateUserBody, errorResponses } from '../schemas.js';
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

    app.get<{ Querystring: PageQuery }>(
      '/users',
      {
        schema: {
          tags: ['users'],
          summary: 'Every user, by e-mail, a page at a time (administrators only)',
          querystring: PageQuery,
          response: { 200: listResponse(Type.Array(Type.Ref('AdminUser'))), ...errorResponses(400, 401, 403) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const ref: ListRef<readonly [string, string]> = { cursors: deps.cursors, path: '/api/v1/users', list: 'users', scope: 'all', valid: isTimeIdPosition };
        const page = pageRequest(ref, request.query);
        const users = await listUsers(deps.accounts, principal, page);
        return sendPage(request, reply, ref, page, users.items, users.next);
      },
    );

    app.patch<{ Params: { id: string }; Body: UpdateUserBody }>(
      '/users/:id',
      {
        schema: {
          tags: ['users'],
          summary: "Reset a user's password (ends their sessions) and/or disable (ends their sessions and tunnels) or enable them (administrators only)",
          params: IdParams,
          body: UpdateUserBody,
          response: { 200: Type.Ref('AdminUser'), ...errorResponses(400, 401, 403, 404, 429) },
        },
      },
      async (request) => {
        return updateUser(deps.accounts, principalOf(request), request.params.id, request.body, (userId) => deps.tunnels.closeForUser(userId));
      },
    );
  };
