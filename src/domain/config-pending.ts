// Configuration pending: what changed since a deployment's live release, recorded by the server so every client tells the same.
import type { DeploymentChanges } from './deployment-catalog.js';

/**
 * Settings a restart applies (the release's container is made anew from them), by the key the API
 * shows. Source settings (repo_url, branch, dockerfile_path) need a build, not a restart, and
 * auto_deploy, previews and name change nothing in the running app: none of those is pending.
 */
const RELEASE_SETTINGS: ReadonlyArray<readonly [keyof DeploymentChanges, string]> = [
  ['health_check_path', 'health_check_path'],
  ['memory_bytes', 'memory_mb'],
  ['nano_cpus', 'cpus'],
  ['volumes', 'volumes'],
  ['replicas', 'replicas'],
];

/** The API keys of `changes` a release would apply, those that differ from `row`'s. */
export function pendingSettingKeys(row: DeploymentChanges, changes: DeploymentChanges): string[] {
  return RELEASE_SETTINGS.filter(([column]) => changes[column] !== undefined && changes[column] !== row[column]).map(([, key]) => key);
}

/** The stored list (JSON array or null) with `keys` added, sorted and without repeats. */
export function mergePendingKeys(stored: string | null, keys: readonly string[]): string {
  return JSON.stringify([...new Set([...parsePendingKeys(stored), ...keys])].sort());
}

/** The stored list of pending keys (empty when none, or unreadable). */
export function parsePendingKeys(stored: string | null): string[] {
  if (stored === null) return [];
  try {
    const value: unknown = JSON.parse(stored);
    return Array.isArray(value) ? value.filter((k): k is string => typeof k === 'string') : [];
  } catch {
    return [];
  }
}
