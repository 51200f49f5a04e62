// The answer of a build's Dockerfile route (decisions §24), for a deployment's builds and a preview's alike: text, or JSON with the detection.
import type { FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { UsedDockerfile } from '../../domain/used-dockerfile.js';
import { errorResponses } from '../schemas.js';

/** A build's Dockerfile as JSON (Accept: application/json): the text, where it sat, whether Slipway generated it and why. */
export const BuildDockerfile = Type.Object({
  path: Type.String(),
  generated: Type.Boolean(),
  detection: Type.Union([Type.Array(Type.String()), Type.Null()]),
  dockerfile: Type.String(),
});

/** The route's responses, for its schema. */
export const dockerfileResponses = {
  200: { description: 'the Dockerfile', content: { 'text/plain': { schema: Type.String() }, 'application/json': { schema: BuildDockerfile } } },
  ...errorResponses(401, 404),
};

/** Whether an Accept header asks for JSON before plain text (no header, or `*\/*`: text). */
function prefersJson(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  const json = accept.indexOf('application/json');
  const text = accept.indexOf('text/plain');
  return json >= 0 && (text < 0 || json < text);
}

/** Sends the Dockerfile a build used as text, or as JSON when the client prefers it. */
export function sendDockerfile(reply: FastifyReply, accept: string | undefined, used: UsedDockerfile): FastifyReply {
  reply.header('Cache-Control', 'no-store').header('X-Slipway-Dockerfile-Generated', String(used.generated));
  if (prefersJson(accept)) return reply.type('application/json; charset=utf-8').send({ ...used });
  return reply.type('text/plain; charset=utf-8').header('X-Content-Type-Options', 'nosniff').send(used.dockerfile);
}
