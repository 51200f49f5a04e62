// HAProxy's runtime API over its Unix socket: one command per connection, arguments checked, every wait bounded.
import { connect } from 'node:net';

/** A runtime API command failed: HAProxy answered an error, or the socket did not answer in time. */
export class RuntimeApiError extends Error {
  override readonly name = 'RuntimeApiError';
}

/**
 * The words a command may be built from: names, host names, addresses, ports and absolute paths.
 * The CLI splits on spaces and `;` and treats `\` and `#` specially, so none of those (nor a line
 * break, which would end the command) may ever come from a value.
 */
const SAFE_WORD = /^[A-Za-z0-9._:/@%-]+$/;

/** True when `word` can be sent as one argument of a runtime API command as it is. */
export function isSafeWord(word: string): boolean {
  return word.length > 0 && word.length <= 1024 && SAFE_WORD.test(word);
}

/** Talks to one HAProxy's admin socket; each call opens a connection, sends one line and reads to the end. */
export class RuntimeApi {
  readonly #socketPath: string;
  readonly #timeoutMs: number;

  constructor(socketPath: string, timeoutMs = 5000) {
    this.#socketPath = socketPath;
    this.#timeoutMs = timeoutMs;
  }

  get socketPath(): string {
    return this.#socketPath;
  }

  /**
   * Runs one command given as words (`['set', 'map', file, key, value]`) and resolves with HAProxy's
   * answer, trimmed. Throws RuntimeApiError before connecting when a word is not safe to send.
   */
  run(words: readonly string[], signal?: AbortSignal): Promise<string> {
    return this.#send(words, undefined, signal);
  }

  /**
   * Runs one command with a multi-line payload (`set ssl cert <name> <<` + PEM): the payload ends at
   * the first empty line, so it may hold none (nor a NUL); PEM text never does.
   */
  runWithPayload(words: readonly string[], payload: string, signal?: AbortSignal): Promise<string> {
    const body = payload.replace(/\r\n/g, '\n').replace(/\n+$/, '');
    if (body === '' || /\n\s*\n/.test(body) || body.includes('\0')) {
      return Promise.reject(new RuntimeApiError('refusing to send a payload with an empty line to HAProxy'));
    }
    return this.#send(words, body, signal);
  }

  #send(words: readonly string[], payload: string | undefined, signal?: AbortSignal): Promise<string> {
    for (const word of words) {
      if (!isSafeWord(word)) return Promise.reject(new RuntimeApiError(`refusing to send an unsafe word to HAProxy: ${JSON.stringify(word)}`));
    }
    const line = payload === undefined ? `${words.join(' ')}\n` : `${words.join(' ')} <<\n${payload}\n\n`;
    return new Promise<string>((resolve, reject) => {
      const socket = connect({ path: this.#socketPath });
      const chunks: Buffer[] = [];
      let settled = false;
      const finish = (err: Error | undefined): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        socket.destroy();
        if (err !== undefined) reject(err);
        else resolve(Buffer.concat(chunks).toString('utf8').trim());
      };
      const onAbort = (): void => finish(new RuntimeApiError(`HAProxy command aborted: ${words[0] ?? ''}`));
      const timer = setTimeout(() => finish(new RuntimeApiError(`HAProxy did not answer "${words.slice(0, 2).join(' ')}" within ${this.#timeoutMs} ms`)), this.#timeoutMs);
      if (signal?.aborted === true) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      socket.on('connect', () => socket.write(line));
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', (err) => finish(new RuntimeApiError(`HAProxy's runtime API: ${err.message}`)));
      // Without a prompt session HAProxy closes the connection once it has answered.
      socket.on('end', () => finish(undefined));
      socket.on('close', () => finish(undefined));
    });
  }

  /** Runs a command whose success is an empty answer (or one of `ok`); anything else is an error. */
  async expect(words: readonly string[], ok: readonly string[] = [], signal?: AbortSignal): Promise<void> {
    const answer = await this.run(words, signal);
    if (answer === '' || ok.some((prefix) => answer.startsWith(prefix))) return;
    throw new RuntimeApiError(`HAProxy refused "${words.slice(0, 3).join(' ')}": ${answer.split('\n')[0] ?? ''}`);
  }
}
