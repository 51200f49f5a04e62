// Routes: a deployment's custom domains (add, list, remove).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { addDomain, listDomains, removeDomain, type CustomDomainDeps } from '../../domain/custom-domains.js';
import type { ApiDeps } from '../api-deps.js';
import { principalOf } from '../authenticate.js';
import { AddDomainBody, DomainParams, IdParams, errorResponses } from '../schemas.js';

type IdRequest = { Params: { id: string } };

export const domainRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    const domainDeps: CustomDomainDeps = { domains: deps.domains, deployments: deps.deployments, appDomain: deps.config.domain, routes: deps.hosts, certificates: deps.certificates };

    app.post<IdRequest & { Body: AddDomainBody }>(
      '/deployments/:id/domains',
      {
        schema: {
          tags: ['domains'],
          summary: 'Serve the deployment at a hostname of yours too (point its DNS at this server); with HTTPS on, a certificate follows',
          params: IdParams,
          body: AddDomainBody,
          response: { 201: Type.Ref('Domain'), ...errorResponses(400, 401, 403, 404, 415) },
        },
      },
      async (request, reply) => reply.code(201).send(await addDomain(domainDeps, principalOf(request), request.params.id, request.body)),
    );

    app.get<IdRequest>(
      '/deployments/:id/domains',
      {
        schema: {
          tags: ['domains'],
          summary: "The deployment's custom domains with their certificates' state, oldest first",
          params: IdParams,
          response: { 200: Type.Array(Type.Ref('Domain')), ...errorResponses(401, 404) },
        },
      },
      async (request) => listDomains(domainDeps, principalOf(request), request.params.id),
    );

    app.delete<{ Params: { id: string; domain_id: string } }>(
      '/deployments/:id/domains/:domain_id',
      {
        schema: {
          tags: ['domains'],
          summary: 'Stop serving the deployment at this hostname (its certificate is dropped)',
          params: DomainParams,
          response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
        },
      },
      async (request, reply) => {
        await removeDomain(domainDeps, principalOf(request), request.params.id, request.params.domain_id);
        return reply.code(204).send();
      },
    );
  };
