// A deployment's compose file setting (contract §21): a path in the source checked as dockerfile_path is, and exclusive with it in a request.
import { DomainError } from '../core/errors.js';

const invalid = (message: string): DomainError => new DomainError('validation_error', message);

/**
 * Checks a path in the source named by `field` (dockerfile_path, compose_path): relative, inside
 * the source, no `..`. Returns it normalized.
 */
export function normalizeSourcePath(value: string, field: string): string {
  const path = value.trim().replace(/^\.\//, '');
  const segments = path.split('/');
  if (
    path.length === 0 ||
    path.length > 255 ||
    path.startsWith('/') ||
    path.includes('\\') ||
    /[\u0000-\u001f\u007f]/.test(path) ||
    segments.some((s) => s === '..' || s === '' || s === '.')
  ) {
    throw invalid(`${field} must be a relative path inside the source, without ".."`);
  }
  return path;
}

/** Checks a compose file path: relative, inside the source, no `..`. Returns it normalized. */
export function normalizeComposePath(value: string): string {
  return normalizeSourcePath(value, 'compose_path');
}

const exclusive = (): DomainError =>
  invalid('compose_path and dockerfile_path are exclusive: a deployment builds either its Dockerfile or the services of its compose file');

/** The stored compose_path of a new deployment (null: it builds its Dockerfile). */
export function composePathOnCreate(input: { compose_path?: string | undefined; dockerfile_path?: string | undefined }): string | null {
  if (input.compose_path === undefined) return null;
  if (input.dockerfile_path !== undefined) throw exclusive();
  return normalizeComposePath(input.compose_path);
}

/**
 * The compose_path change of a PATCH: a path switches the deployment to its compose file, null
 * back to its Dockerfile, and a dockerfile_path alone switches back to that Dockerfile too.
 */
export function composePathChange(input: { compose_path?: string | null | undefined; dockerfile_path?: string | undefined }): { compose_path?: string | null } {
  if (input.compose_path !== undefined && input.compose_path !== null && input.dockerfile_path !== undefined) throw exclusive();
  if (input.compose_path !== undefined) return { compose_path: input.compose_path === null ? null : normalizeComposePath(input.compose_path) };
  if (input.dockerfile_path !== undefined) return { compose_path: null };
  return {};
}
