// Answers that carry a credential (a session token, an API key, a webhook secret) are never kept by a browser or a proxy.
import type { FastifyReply } from 'fastify';

/** Marks `reply` as not to be stored anywhere: call it on every answer that holds a token or a secret. */
export function noStore(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
}
