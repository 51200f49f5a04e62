// The one error type of the CLI: a one-line message for the user and the process exit code.

/** Exit codes: 1 for a failed operation, 2 for a usage error, 130 when interrupted by Ctrl-C. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
export const EXIT_INTERRUPTED = 130;

/** An error the CLI prints as `error: <message>` (no stack) before exiting with `exitCode`. */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly exitCode: number;
  /** The server's stable error code, when the error came from the API. */
  readonly code: string | undefined;
  /** The HTTP status, when the error came from the API. */
  readonly status: number | undefined;

  constructor(message: string, options: { exitCode?: number; code?: string; status?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.exitCode = options.exitCode ?? EXIT_FAILURE;
    this.code = options.code;
    this.status = options.status;
  }
}

/** A usage error (bad argument or option value): exit code 2. */
export function usageError(message: string): CliError {
  return new CliError(message, { exitCode: EXIT_USAGE });
}
