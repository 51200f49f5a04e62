// Calls to the Docker engine: time limits and aborts that also hold for dockerode methods ignoring their signal, and the engine's status codes and messages.
import type Dockerode from 'dockerode';

/**
 * Reads a build or push progress stream to its end; rejects with the engine's own error when an
 * event carries one (a failed push or build still ends its stream normally).
 */
export function followProgress(docker: Dockerode, stream: NodeJS.ReadableStream, what: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    docker.modem.followProgress(stream, (err: Error | null, output: Array<{ error?: string; errorDetail?: { message?: string } }>) => {
      const failed = output.find((event) => event.error !== undefined || event.errorDetail !== undefined);
      if (err !== null) reject(err);
      else if (failed !== undefined) reject(new Error(failed.errorDetail?.message ?? failed.error ?? `${what} failed`));
      else resolve();
    });
  });
}

/**
 * Runs `run` with a signal that fires after `ms` (or when `outer` aborts). The call is also raced
 * against that signal, since a few dockerode methods (image inspect, version) ignore it.
 */
export async function withTimeout<T>(what: string, ms: number, run: (signal: AbortSignal) => Promise<T>, outer?: AbortSignal): Promise<T> {
  if (outer?.aborted === true) throw abortError(what, outer);
  const timeout = AbortSignal.timeout(ms);
  const signal = outer === undefined ? timeout : AbortSignal.any([outer, timeout]);
  return await new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(outer?.aborted === true ? abortError(what, outer) : timeoutError(what, ms));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    run(signal)
      .then(resolve, (err: unknown) => reject(signal.aborted ? (outer?.aborted === true ? abortError(what, outer) : timeoutError(what, ms, err)) : err))
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}

export function timeoutError(what: string, ms: number, cause?: unknown): Error {
  const err = new Error(`Docker engine: ${what} did not finish within ${Math.round(ms / 1000)}s`, { cause });
  err.name = 'TimeoutError';
  return err;
}

export function abortError(what: string, signal: AbortSignal): Error {
  const err = new Error(`${what} aborted`, { cause: signal.reason });
  err.name = 'AbortError';
  return err;
}

/** Runs `run`, answering undefined when the engine replies with one of `codes`. */
export async function ignoreStatus<T>(codes: number[], run: () => Promise<T>): Promise<T | undefined> {
  try {
    return await run();
  } catch (err) {
    const code = statusCode(err);
    if (code !== undefined && codes.includes(code)) return undefined;
    throw err;
  }
}

export function statusCode(err: unknown): number | undefined {
  if (typeof err === 'object' && err !== null && 'statusCode' in err && typeof err.statusCode === 'number') {
    return err.statusCode;
  }
  return undefined;
}

/** The engine's own message from a docker-modem error (its JSON body), else the error text. */
export function engineMessage(err: unknown): string {
  if (typeof err === 'object' && err !== null && 'json' in err) {
    const json: unknown = err.json;
    if (typeof json === 'object' && json !== null && 'message' in json && typeof json.message === 'string') return json.message;
    if (typeof json === 'string' && json.trim() !== '') return json.trim();
  }
  return withoutClientPrefix(err instanceof Error ? err.message : String(err));
}

/** dockerode's own wording around the engine's ("(HTTP code 400) unexpected - …") cut off: it means nothing to a person. */
export function withoutClientPrefix(message: string): string {
  return message.replace(/^\(HTTP code \d{3}\) [^-]*- /, '').trim();
}
