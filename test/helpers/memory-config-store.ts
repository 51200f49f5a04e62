// An in-memory AppConfigStore for tests of logic above it (the lifecycle without a database).
import type { AppConfigStore, EnvChange, EnvVar } from '../../src/domain/app-config.js';

const byKey = (a: EnvVar, b: EnvVar): number => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/** AppConfigStore in maps; the shared contract suite (test/domain/app-config-store.test.ts) runs against it. */
export class MemoryConfigStore implements AppConfigStore {
  readonly vars = new Map<string, EnvVar[]>();
  readonly builds = new Map<string, EnvVar[]>();

  async current(deploymentId: string): Promise<EnvVar[]> {
    return [...(this.vars.get(deploymentId) ?? [])].sort(byKey);
  }

  async change(deploymentId: string, change: EnvChange, check: (result: readonly EnvVar[]) => void): Promise<EnvVar[]> {
    const next = new Map((await this.current(deploymentId)).map((v) => [v.key, v]));
    const now = new Date().toISOString();
    for (const key of change.unset) next.delete(key);
    for (const [key, value] of change.set) next.set(key, { key, value, secret: change.secret, updated_at: now });
    const result = [...next.values()].sort(byKey);
    check(result);
    this.vars.set(deploymentId, result);
    return [...result];
  }

  async recordForBuild(deploymentId: string, buildId: string): Promise<EnvVar[]> {
    const vars = await this.current(deploymentId);
    this.builds.set(buildId, vars);
    return [...vars];
  }

  async setBuildConfig(buildId: string, vars: readonly EnvVar[]): Promise<void> {
    this.builds.set(buildId, [...vars]);
  }

  async buildConfig(buildId: string): Promise<EnvVar[] | undefined> {
    const vars = this.builds.get(buildId);
    return vars === undefined ? undefined : [...vars];
  }

  async replace(deploymentId: string, vars: readonly EnvVar[]): Promise<void> {
    this.vars.set(deploymentId, [...vars].sort(byKey));
  }
}
