// Deployment volumes: named engine volumes mounted into every release; the rules of decisions §9.
import path from 'node:path';
import { DNS_LABEL } from '../core/dns-label.js';
import { DomainError } from '../core/errors.js';

/** One volume of a deployment: its name and where releases mount it. */
export interface VolumeSpec {
  readonly name: string;
  readonly mount_path: string;
}

/** Most volumes one deployment may have. */
export const MAX_VOLUMES = 10;

/** Paths the kernel or the engine owns inside every container: a volume there breaks the container. */
const SYSTEM_PATHS = ['/proc', '/sys', '/dev'];

const invalid = (message: string): DomainError => new DomainError('validation_error', message);

/** Checks and normalizes a `volumes` field (names folded to lower case); throws validation_error naming the volume. */
export function normalizeVolumes(input: ReadonlyArray<{ name: string; mount_path: string }>): VolumeSpec[] {
  if (input.length > MAX_VOLUMES) throw invalid(`volumes: at most ${MAX_VOLUMES} per deployment, got ${input.length}`);
  const names = new Set<string>();
  const paths = new Set<string>();
  return input.map((volume, i) => {
    const name = volume.name.trim().toLowerCase();
    if (!DNS_LABEL.test(name)) {
      throw invalid(`volumes[${i}].name ${JSON.stringify(volume.name.slice(0, 80))} must be a DNS label: 1-63 characters of a-z, 0-9 and "-", not starting or ending with "-"`);
    }
    if (names.has(name)) throw invalid(`volume "${name}" is listed twice`);
    names.add(name);
    const mount = volume.mount_path;
    const problem = mountPathProblem(mount);
    if (problem !== undefined) throw invalid(`volume "${name}": mount_path ${JSON.stringify(mount.slice(0, 200))} ${problem}`);
    if (paths.has(mount)) throw invalid(`volume "${name}": mount_path "${mount}" is used by another volume`);
    paths.add(mount);
    return { name, mount_path: mount };
  });
}

function mountPathProblem(mount: string): string | undefined {
  if (!mount.startsWith('/')) return 'must be an absolute path';
  if (mount.length > 1024) return 'must be at most 1024 characters';
  if (/[\u0000-\u001f\u007f\\]/.test(mount)) return 'must not contain control characters or "\\"';
  if (mount === '/') return 'must not be "/"';
  if (mount.split('/').includes('..')) return 'must not contain ".."';
  if (path.posix.normalize(mount) !== mount || mount.endsWith('/')) return 'must be normalized (no "//", "." or trailing "/")';
  if (SYSTEM_PATHS.some((p) => mount === p || mount.startsWith(`${p}/`))) return 'must not be under /proc, /sys or /dev';
  return undefined;
}

/** The volumes stored on a deployment row (JSON written by this module). */
export function parseStoredVolumes(json: string): VolumeSpec[] {
  if (json === '[]') return []; // most deployments: no parse on the list's hot path
  const parsed = JSON.parse(json) as VolumeSpec[];
  return parsed.map((v) => ({ name: v.name, mount_path: v.mount_path }));
}
