// What a compose file can be wrong about: each problem names its service, key and line, and all of them fail a build as one message.
import { DomainError } from '../core/errors.js';

/** One refused or invalid thing in a compose file. */
export interface ComposeProblem {
  /** The service it is in; undefined for a top-level key. */
  readonly service?: string | undefined;
  /** The key, dotted from the service (`volumes`, `deploy.resources`) or from the top level. */
  readonly key: string;
  readonly message: string;
  /** 1-based line in the file, when known. */
  readonly line?: number | undefined;
}

/** Where a problem is, in words: `service "db", key volumes (line 12)`. */
export function problemPlace(problem: Pick<ComposeProblem, 'service' | 'key' | 'line'>): string {
  const who = problem.service === undefined ? `top-level key ${problem.key}` : `service "${problem.service}", key ${problem.key}`;
  return problem.line === undefined ? who : `${who} (line ${problem.line})`;
}

/** Every problem of the file as one build failure (nothing is built or started). */
export function composeRefusal(file: string, problems: readonly ComposeProblem[]): DomainError {
  const lines = problems.map((p) => `${problemPlace(p)}: ${p.message}`);
  return new DomainError('build_failed', `compose file "${file}" refused (${problems.length} problem${problems.length === 1 ? '' : 's'}): ${lines.join('; ')}`);
}

/** A compose file that cannot be used at all (unreadable, not YAML, not a compose file). */
export function composeFailure(file: string, message: string): DomainError {
  return new DomainError('build_failed', `compose file "${file}": ${message}`);
}
