// Route: POST /api/v1/hooks/{id}, where git hosts deliver pushes. No bearer: the body's signature is the credential.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { presentBuild } from '../../domain/builds.js';
import { DomainError } from '../../core/errors.js';
import { MAX_DELIVERY_BYTES } from '../../domain/webhook-delivery.js';
import { findHookTarget, receiveDelivery } from '../../domain/webhooks.js';
import type { HookTarget } from '../../domain/webhook-store.js';
import type { ApiDeps } from '../api-deps.js';
import { IdParams, MessageSchema, errorResponses } from '../schemas.js';

/**
 * The hook endpoint, in its own scope: its bodies are kept as raw bytes (the signature is an HMAC of
 * exactly those bytes, never of re-serialized JSON), JSON or GitHub's form-encoded `payload=`.
 */
export const hookRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser(
      ['application/json', 'application/x-www-form-urlencoded'],
      { parseAs: 'buffer', bodyLimit: MAX_DELIVERY_BYTES },
      (_request, body, done) => done(null, body),
    );
    // A delivery's credential is its signature: a 401 here must not invite the sender to send a bearer.
    app.addHook('onSend', async (_request, reply, payload) => {
      reply.removeHeader('WWW-Authenticate');
      return payload;
    });
    const targets = new WeakMap<FastifyRequest, HookTarget>();
    const receiveDeps = {
      webhooks: deps.webhooks,
      operations: deps.operations,
      branchTip: deps.branchTip,
      signatureFailures: deps.hookLimiter,
      deployments: deps.deployments,
      previews: deps.previews,
      configs: deps.configs,
    };

    app.post<{ Params: { id: string } }>(
      '/hooks/:id',
      {
        bodyLimit: MAX_DELIVERY_BYTES,
        schema: {
          tags: ['webhooks'],
          summary:
            'Receive a push or pull request event from GitHub (X-Hub-Signature-256), Gitea/Forgejo (X-Gitea-Signature) or GitLab (X-Gitlab-Token); ' +
            '202 with the build when it deploys or builds a preview, 200 with why not (or what it removed) otherwise',
          security: [],
          consumes: ['application/json', 'application/x-www-form-urlencoded'],
          params: IdParams,
          body: Type.Unknown({ description: "the git host's event payload, signed over its raw bytes" }),
          response: { 200: MessageSchema, 202: Type.Ref('Build'), ...errorResponses(400, 401, 404, 409, 413, 415, 429) },
        },
        // The body is raw bytes checked by the handler, not a schema.
        validatorCompiler: () => () => true,
        // Before a byte of the body is read: the webhook must exist. Only failed signatures count toward
        // the rate limit (checked in receiveDelivery): a correctly signed delivery is never refused for rate.
        onRequest: async (request) => {
          targets.set(request, await findHookTarget(deps.webhooks, request.params.id));
        },
      },
      async (request, reply) => {
        const target = targets.get(request);
        if (target === undefined) throw new DomainError('not_found', 'no webhook here');
        const answer = await receiveDelivery(receiveDeps, target, {
          headers: request.headers,
          contentType: request.headers['content-type'],
          rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
        });
        if (answer.status === 202) return reply.code(202).send(presentBuild(answer.build));
        return reply.code(200).send({ message: answer.message });
      },
    );
  };
