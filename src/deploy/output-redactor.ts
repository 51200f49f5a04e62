// What masks a release's output (its runtime logs, its crash line): the secrets it started with, the deployment's current ones, and those the runtime added (linked databases).
import type { AppConfigStore } from '../domain/app-config.js';
import { addedSecretVars, type AppRuntime } from '../runtime/app-runtime.js';
import { redactorFor, type SecretRedactor } from '../secrets/redact.js';

/** Secret values are write-only: an app printing one (or its database's URL) does not make it readable in its output. */
export async function outputRedactor(
  configs: Pick<AppConfigStore, 'buildConfig' | 'current'>,
  runtime: Pick<AppRuntime, 'addedSecrets'>,
  buildId: string,
  deploymentId: string,
): Promise<SecretRedactor> {
  const released = (await configs.buildConfig(buildId)) ?? [];
  const current = await configs.current(deploymentId);
  return redactorFor([...released, ...current, ...(await addedSecretVars(runtime, deploymentId))]);
}
