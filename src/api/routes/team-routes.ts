// Routes: teams, their members and roles (decisions §18), and the audit log.
import type { FastifyPluginAsync } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { addMember, changeMemberRole, createTeam, deleteTeam, getTeam, listMembers, listTeams, removeMember, updateTeam } from '../../domain/teams.js';
import { listAudit, type AuditPosition } from '../../domain/audit.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { PageQuery, isSeqPosition, listResponse, pageRequest, sendPage, type ListRef } from '../list-pages.js';
import { IdParams, errorResponses } from '../schemas.js';

const Role = Type.Unsafe<'viewer' | 'developer' | 'owner'>({ type: 'string', enum: ['viewer', 'developer', 'owner'] });
const TeamSchema = Type.Object({ id: Type.String(), name: Type.String(), created_at: Type.String(), role: Role });
const MemberSchema = Type.Object({ user_id: Type.String(), email: Type.String(), role: Role, created_at: Type.String() });
const Nullable = Type.Unsafe<string | null>({ type: 'string', nullable: true });
const AuditEntrySchema = Type.Object({
  id: Type.String(),
  at: Type.String(),
  actor_id: Nullable,
  actor_email: Nullable,
  via: Type.String({ description: '`session`, the API key\'s prefix, or `webhook`' }),
  action: Type.String(),
  target_type: Type.String(),
  target_id: Nullable,
  team_id: Nullable,
  ip: Nullable,
  outcome: Type.Unsafe<'success' | 'failure'>({ type: 'string', enum: ['success', 'failure'] }),
});

const TeamBody = Type.Object({ name: Type.String({ maxLength: 1000 }) }, { additionalProperties: false });
const TeamPatchBody = Type.Object({ name: Type.Optional(Type.String({ maxLength: 1000 })) }, { additionalProperties: false });
// The role is checked by the use-case, so an unknown one is named in the message.
const MemberBody = Type.Object({ email: Type.String({ maxLength: 1000 }), role: Type.String({ maxLength: 100 }) }, { additionalProperties: false });
const RoleBody = Type.Object({ role: Type.String({ maxLength: 100 }) }, { additionalProperties: false });
const MemberParams = Type.Object({ id: Type.String(), user_id: Type.String() });
const AuditQuery = Type.Composite([
  PageQuery,
  Type.Object({ team_id: Type.Optional(Type.String({ maxLength: 100 })), target_id: Type.Optional(Type.String({ maxLength: 200 })) }),
]);

type IdRequest = { Params: { id: string } };
type MemberRequest = { Params: { id: string; user_id: string } };

export const teamRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const tags = ['teams'];
    app.post<{ Body: Static<typeof TeamBody> }>(
      '/teams',
      { schema: { tags, summary: 'Create a team; you are its owner', body: TeamBody, response: { 201: TeamSchema, ...errorResponses(400, 401) } } },
      async (request, reply) => reply.code(201).send(await createTeam(deps.teams, principalOf(request), request.body)),
    );
    app.get(
      '/teams',
      { schema: { tags, summary: 'The teams you belong to, with your role', response: { 200: Type.Array(TeamSchema), ...errorResponses(401) } } },
      async (request) => listTeams(deps.teams, principalOf(request)),
    );
    app.get<IdRequest>(
      '/teams/:id',
      { schema: { tags, summary: 'One team', params: IdParams, response: { 200: TeamSchema, ...errorResponses(401, 404) } } },
      async (request) => getTeam(deps.teams, principalOf(request), request.params.id),
    );
    app.patch<IdRequest & { Body: Static<typeof TeamPatchBody> }>(
      '/teams/:id',
      { schema: { tags, summary: 'Rename a team (owners)', params: IdParams, body: TeamPatchBody, response: { 200: TeamSchema, ...errorResponses(400, 401, 403, 404) } } },
      async (request) => updateTeam(deps.teams, principalOf(request), request.params.id, request.body),
    );
    app.delete<IdRequest>(
      '/teams/:id',
      { schema: { tags, summary: 'Delete a team that holds no deployment (owners)', params: IdParams, response: { 204: { type: 'null' }, ...errorResponses(400, 401, 403, 404) } } },
      async (request, reply) => {
        await deleteTeam(deps.teams, principalOf(request), request.params.id);
        return reply.code(204).send();
      },
    );
    app.get<IdRequest>(
      '/teams/:id/members',
      { schema: { tags, summary: "The team's members and their roles", params: IdParams, response: { 200: Type.Array(MemberSchema), ...errorResponses(401, 404) } } },
      async (request) => listMembers(deps.teams, principalOf(request), request.params.id),
    );
    app.post<IdRequest & { Body: Static<typeof MemberBody> }>(
      '/teams/:id/members',
      {
        schema: { tags, summary: 'Add a user (by e-mail) with a role (owners)', params: IdParams, body: MemberBody, response: { 201: MemberSchema, ...errorResponses(400, 401, 403, 404) } },
      },
      async (request, reply) => reply.code(201).send(await addMember(deps.teams, principalOf(request), request.params.id, request.body)),
    );
    app.patch<MemberRequest & { Body: Static<typeof RoleBody> }>(
      '/teams/:id/members/:user_id',
      {
        schema: { tags, summary: "Change a member's role (owners); the team keeps an owner", params: MemberParams, body: RoleBody, response: { 200: MemberSchema, ...errorResponses(400, 401, 403, 404) } },
      },
      async (request) => changeMemberRole(deps.teams, principalOf(request), request.params.id, request.params.user_id, request.body),
    );
    app.delete<MemberRequest>(
      '/teams/:id/members/:user_id',
      {
        schema: { tags, summary: 'Remove a member (owners; anyone may leave); the team keeps an owner', params: MemberParams, response: { 204: { type: 'null' }, ...errorResponses(400, 401, 403, 404) } },
      },
      async (request, reply) => {
        await removeMember(deps.teams, principalOf(request), request.params.id, request.params.user_id);
        return reply.code(204).send();
      },
    );

    app.get<{ Querystring: Static<typeof AuditQuery> }>(
      '/audit',
      {
        schema: {
          tags: ['audit'],
          summary: 'The audit log, newest first: your own entries and those of the teams you own (an administrator: all)',
          querystring: AuditQuery,
          response: { 200: listResponse(Type.Array(AuditEntrySchema)), ...errorResponses(400, 401) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const ref: ListRef<AuditPosition> = { cursors: deps.cursors, path: '/api/v1/audit', list: 'audit', scope: principal.userId, valid: isSeqPosition };
        const page = pageRequest(ref, request.query);
        const entries = await listAudit(deps.audit, principal, { teamId: request.query.team_id, targetId: request.query.target_id }, page);
        return sendPage(request, reply, ref, page, entries.items, entries.next);
      },
    );
  };
