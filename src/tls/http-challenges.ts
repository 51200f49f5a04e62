// ACME HTTP-01 challenge answers: the tokens in flight, served at /.well-known/acme-challenge/<token> on the plain port.
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The path prefix ACME validation servers request (RFC 8555 §8.3). */
export const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';

/** Key authorizations by token, for as long as an order waits for validation. */
export class HttpChallenges {
  readonly #answers = new Map<string, string>();

  set(token: string, keyAuthorization: string): void {
    this.#answers.set(token, keyAuthorization);
  }

  delete(token: string): void {
    this.#answers.delete(token);
  }

  /**
   * Answers a challenge request (any host: the CA asks on the name being validated); returns false
   * for any other path so the caller handles it. An unknown token is a plain 404.
   */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url ?? '';
    if (!url.startsWith(CHALLENGE_PREFIX)) return false;
    const token = url.slice(CHALLENGE_PREFIX.length).split('?')[0] ?? '';
    const answer = this.#answers.get(token);
    const body = answer ?? 'no such challenge\n';
    res.writeHead(answer === undefined ? 404 : 200, {
      'content-type': 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  }
}
