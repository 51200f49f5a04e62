// Starting a live release again after its replicas stopped (a server restart, an engine restart, a host reboot).
import { parseReleaseSet } from '../runtime/release-set.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeploymentRow } from '../domain/deployments.js';
import type { AppRuntime, StartedRelease } from '../runtime/app-runtime.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { immediateTurn, releaseTarget, type EngineTurn, type ReleaseSettings } from '../runtime/release.js';

export interface RecoverReleaseDeps {
  readonly runtime: AppRuntime;
  /** Where the build's image is looked for. */
  readonly engine: Pick<ContainerEngine, 'imageExists'>;
  readonly configs: AppConfigStore;
  readonly settings: ReleaseSettings & { readonly startupTimeoutMs: number };
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/**
 * Brings `live` (the deployment's live build) back: its recorded release is started again (its
 * replicas keep their state) and must pass the health check; when that release is gone or does not
 * become healthy, a fresh one is started from the build's image with the configuration it was
 * released with (and the old one removed). Resolves with the healthy release, or null when neither
 * is possible (no release, no image). Runtime errors and aborts are thrown. Each start runs in
 * `engineTurn`; the health checks do not.
 */
export async function recoverRelease(
  deps: RecoverReleaseDeps,
  dep: DeploymentRow,
  live: BuildRow,
  signal: AbortSignal,
  engineTurn: EngineTurn = immediateTurn,
): Promise<StartedRelease | null> {
  const { runtime, engine, settings, log } = deps;
  const timeoutMs = settings.startupTimeoutMs;
  const imageKept = async (): Promise<string | null> => (live.image_id !== null && (await engine.imageExists(live.image_id)) ? live.image_id : null);
  let image: string | null;
  if (live.container_id !== null) {
    try {
      return await runtime.resumeRelease(live.container_id, { image: live.image_id, healthCheckPath: dep.health_check_path }, { timeoutMs, signal, engineTurn });
    } catch (err) {
      signal.throwIfAborted();
      image = await imageKept();
      if (image === null) throw err;
      log('warn', `the release of ${dep.subdomain} did not come back; starting a fresh one from build ${live.id}`, { err });
    }
  } else {
    image = await imageKept();
  }
  if (image === null) return null;
  const vars = (await deps.configs.buildConfig(live.id)) ?? (await deps.configs.current(dep.id));
  const fresh = await runtime.startRelease(releaseTarget(dep, { id: live.id, image, vars, set: parseReleaseSet(live.release_set) }, settings), { timeoutMs, signal, engineTurn });
  if (live.container_id !== null) await runtime.removeRelease(live.container_id).catch(() => undefined);
  return fresh;
}
