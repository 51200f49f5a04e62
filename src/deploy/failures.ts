// How a failed or cancelled build is described in its record (`error`) and log.
import { stripAnsi } from '../core/ansi.js';
import { DomainError } from '../core/errors.js';
import { EngineBuildError } from '../runtime/engine.js';
import { withoutClientPrefix } from '../runtime/docker/engine-calls.js';
import { redactCredentials } from '../source/git.js';
import { ReleaseError, lastLine } from '../runtime/release.js';
import type { DeployFailure } from '../proxy/routing-table.js';

/** Failures that are the app's or the source's doing (not Slipway's): reported, not logged as errors. */
export function isExpectedFailure(err: unknown): boolean {
  return (
    err instanceof EngineBuildError ||
    err instanceof ReleaseError ||
    err instanceof DomainError ||
    (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError'))
  );
}

/** A build stopped by its own time limit (SLIPWAY_BUILD_TIMEOUT), not by any shorter limit of one of its steps. */
export class BuildTimeLimit extends Error {
  constructor(limitMs: number) {
    super(`the build exceeded its time limit of ${Math.round(limitMs / 1000)} s`);
    this.name = 'TimeoutError';
  }
}

/** The text a build record's `error` carries: the cancel reason, the build output's end, or the cause. */
export function describeFailure(err: unknown, cancel: AbortSignal): string {
  if (cancel.aborted) return cancel.reason instanceof Error ? cancel.reason.message : 'cancelled';
  // One line: the build log already holds the whole output, once.
  if (err instanceof EngineBuildError) {
    return stripAnsi(err.message.startsWith('image build failed') ? err.message : `image build failed: ${lastLine(err.outputTail) || err.message}`);
  }
  // The build's time limit says so; any other limit (one engine call's, one step's) says which it was.
  if (err instanceof ReleaseError || err instanceof DomainError || err instanceof BuildTimeLimit) return err.message;
  return redactCredentials(withoutClientPrefix(err instanceof Error ? err.message : String(err)));
}

/**
 * The failure in Slipway's words alone, for the server's console: never the app's output nor the
 * build output (either may hold anything), git errors with their credentials redacted.
 */
export function summarizeFailure(err: unknown, cancel: AbortSignal): string {
  if (cancel.aborted) return describeFailure(err, cancel);
  if (err instanceof EngineBuildError) return 'the image build failed';
  if (err instanceof ReleaseError) return err.reason;
  if (err instanceof DomainError || (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError'))) {
    return describeFailure(err, cancel);
  }
  return 'an internal error (logged above)';
}

/**
 * Which step failed, for the failed app's 503 page: the release (an image was built), the image
 * build, or the source (the repository could not be read or fetched); undefined when unclear.
 */
export function failedStep(err: unknown, imageBuilt: boolean): DeployFailure | undefined {
  if (imageBuilt) return 'start';
  if (err instanceof EngineBuildError) return 'build';
  const message = err instanceof Error ? err.message : '';
  if (/^cannot read the repository|^git [a-z-]+ (failed|timed out)/.test(message)) return 'source';
  return undefined;
}
