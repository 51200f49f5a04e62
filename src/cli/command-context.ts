// What every client command shares: Ctrl-C handling, the logged-in API client, and the --json option.
import { InvalidArgumentError, type Command } from 'commander';
import { ApiClient } from './api-client.js';
import { CliError, EXIT_INTERRUPTED } from './cli-error.js';
import type { CliIo } from './cli-io.js';
import { activeLogin, readSavedLogin, type ActiveLogin } from './credentials.js';

/** Options every client command has. */
export interface JsonOption {
  json?: boolean;
}

/** Adds `--json` to a command. */
export function withJson(command: Command): Command {
  return command.option('--json', 'print the raw JSON answer (for scripts)');
}

/**
 * Runs a command body with an AbortSignal that Ctrl-C fires; every wait in the body takes it, so
 * the command ends at once with `interrupted` (exit 130) instead of leaving work half-watched.
 */
export async function withInterrupt<T>(io: CliIo, body: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const stop = io.onInterrupt(() => {
    if (controller.signal.aborted) return;
    io.stderr.write('\n');
    controller.abort();
  });
  try {
    return await body(controller.signal);
  } catch (err) {
    if (controller.signal.aborted && !(err instanceof CliError)) throw new CliError('interrupted', { exitCode: EXIT_INTERRUPTED });
    throw err;
  } finally {
    stop();
  }
}

/** The server and credential in use (SLIPWAY_URL / SLIPWAY_API_KEY over the saved login). */
export async function currentLogin(io: CliIo): Promise<ActiveLogin> {
  const login = activeLogin(io.env, await readSavedLogin(io.env.configDir));
  if (login === undefined) throw new CliError('not logged in: run `slipway login --url URL` (or set SLIPWAY_URL and SLIPWAY_API_KEY)');
  if (login.bearer === undefined) throw new CliError(`not logged in to ${login.url}: run \`slipway login\` (or set SLIPWAY_API_KEY)`);
  return login;
}

/** An API client for the current login. */
export async function connect(io: CliIo, signal: AbortSignal): Promise<ApiClient> {
  const login = await currentLogin(io);
  return new ApiClient({ url: login.url, bearer: login.bearer, signal });
}

/** `--limit N`: at most N items of a list (all of them without it). */
export function limitOption(raw: string): number {
  if (!/^[1-9]\d{0,8}$/.test(raw)) throw new InvalidArgumentError('expected a whole number of at least 1');
  return Number(raw);
}

/** Options of a list command. */
export type ListOptions = JsonOption & { limit?: number };
