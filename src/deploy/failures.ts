// How a failed or cancelled build is described in its record (`error`) and log.
import { DomainError } from '../core/errors.js';
import { EngineBuildError } from '../runtime/engine.js';
import { redactCredentials } from '../source/git.js';
import { ReleaseError } from './release.js';

/** Failures that are the app's or the source's doing (not Slipway's): reported, not logged as errors. */
export function isExpectedFailure(err: unknown): boolean {
  return (
    err instanceof EngineBuildError ||
    err instanceof ReleaseError ||
    err instanceof DomainError ||
    (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError'))
  );
}

/** The text a build record's `error` carries: the cancel reason, the build output's end, or the cause. */
export function describeFailure(err: unknown, cancel: AbortSignal, buildTimeoutMs: number): string {
  if (cancel.aborted) return cancel.reason instanceof Error ? cancel.reason.message : 'cancelled';
  if (err instanceof EngineBuildError) return `image build failed: ${err.outputTail.trim() || err.message}`;
  if (err instanceof ReleaseError || err instanceof DomainError) return err.message;
  if (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError')) {
    return `the build exceeded its time limit of ${Math.round(buildTimeoutMs / 1000)} s`;
  }
  return redactCredentials(err instanceof Error ? err.message : String(err));
}
