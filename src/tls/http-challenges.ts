// ACME HTTP-01 challenge answers: the tokens in flight (behind a store port), served at /.well-known/acme-challenge/<token> on the plain port.
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The path prefix ACME validation servers request (RFC 8555 §8.3). */
export const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';

/** An ACME token is base64url (RFC 8555 §8.1); anything else is answered 404 without a lookup. */
const TOKEN = /^[A-Za-z0-9_-]{1,256}$/;

/**
 * Where key authorizations wait while their order is open. Every instance must answer every
 * instance's challenges (decisions §15), so the server keeps them in the database
 * (src/db/challenge-store.ts); `memoryChallengeStore` is the one-process implementation.
 */
export interface ChallengeStore {
  set(token: string, keyAuthorization: string): Promise<void>;
  delete(token: string): Promise<void>;
  get(token: string): Promise<string | undefined>;
}

/** Challenges held in this process only. */
export function memoryChallengeStore(): ChallengeStore {
  const answers = new Map<string, string>();
  return {
    set: async (token, keyAuthorization) => void answers.set(token, keyAuthorization),
    delete: async (token) => void answers.delete(token),
    get: async (token) => answers.get(token),
  };
}

/** Key authorizations by token, for as long as an order waits for validation. */
export class HttpChallenges {
  readonly #store: ChallengeStore;
  readonly #log: ((level: 'warn', msg: string, detail?: object) => void) | undefined;

  constructor(store: ChallengeStore = memoryChallengeStore(), log?: (level: 'warn', msg: string, detail?: object) => void) {
    this.#store = store;
    this.#log = log;
  }

  set(token: string, keyAuthorization: string): Promise<void> {
    return this.#store.set(token, keyAuthorization);
  }

  delete(token: string): Promise<void> {
    return this.#store.delete(token);
  }

  /**
   * Answers a challenge request (any host: the CA asks on the name being validated); returns false
   * for any other path so the caller handles it. An unknown token is a plain 404; a store that
   * cannot be read, a 503 (the CA tries again).
   */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url ?? '';
    if (!url.startsWith(CHALLENGE_PREFIX)) return false;
    const token = url.slice(CHALLENGE_PREFIX.length).split('?')[0] ?? '';
    const lookup = TOKEN.test(token) ? this.#store.get(token) : Promise.resolve(undefined);
    lookup.then(
      (answer) => answer === undefined ? reply(req, res, 404, 'no such challenge\n') : reply(req, res, 200, answer),
      (err: unknown) => {
        this.#log?.('warn', 'could not read an ACME challenge', { error: err });
        reply(req, res, 503, 'challenges cannot be read now\n');
      },
    );
    return true;
  }
}

function reply(req: IncomingMessage, res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}
