// Starting a live release again after its container stopped (a server restart, an engine restart, a host reboot).
import type { Upstream } from '../core/upstream.js';
import type { AppConfigStore } from '../domain/app-config.js';
import type { BuildRow } from '../domain/builds.js';
import type { DeploymentRow } from '../domain/deployments.js';
import type { ContainerEngine, ContainerInfo } from '../runtime/engine.js';
import { appPort, immediateTurn, releaseTarget, startRelease, waitHealthy, type EngineTurn, type ReleaseSettings } from './release.js';

export interface RecoverReleaseDeps {
  readonly engine: ContainerEngine;
  readonly configs: AppConfigStore;
  readonly settings: ReleaseSettings & { readonly startupTimeoutMs: number };
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/**
 * Brings `live` (the deployment's live build) back: its recorded container is started again (it keeps
 * its state and name) and must pass the health check; when that container is gone or does not become
 * healthy, a fresh container is started from the build's image with the configuration it was
 * released with (and the old one removed). Resolves with the healthy container, or null when
 * neither is possible (no container, no image). Engine errors and aborts are thrown. Each start
 * (the recorded container's, a fresh one's) runs in `engineTurn`; the health checks do not.
 */
export async function recoverRelease(
  deps: RecoverReleaseDeps,
  dep: DeploymentRow,
  live: BuildRow,
  signal: AbortSignal,
  engineTurn: EngineTurn = immediateTurn,
): Promise<(ContainerInfo & { upstream: Upstream }) | null> {
  const { engine, settings, log } = deps;
  const timeoutMs = settings.startupTimeoutMs;
  // Few engine calls on the common path (the container is there): start (with its inspect), the image's port, the health probe.
  const imageKept = async (): Promise<string | null> => (live.image_id !== null && (await engine.imageExists(live.image_id)) ? live.image_id : null);
  let old: ContainerInfo | null = null;
  let image: string | null;
  if (live.container_id !== null) {
    try {
      const containerId = live.container_id;
      const started = await engineTurn(async () => {
        // Starting a running container is a no-op; starting one that is gone throws (then a fresh one is started).
        const info = await engine.startContainer(containerId);
        // The port only names what was waited for in messages; a pruned image must not stop the start.
        const port = live.image_id === null ? 8080 : await appPort(engine, live.image_id).catch(() => 8080);
        return { info, port };
      });
      old = started.info;
      return await waitHealthy(engine, old, { port: started.port, healthPath: dep.health_check_path, timeoutMs, signal });
    } catch (err) {
      signal.throwIfAborted();
      image = await imageKept();
      if (image === null) throw err;
      if (old === null) log('warn', `live container of ${dep.subdomain} vanished; starting build ${live.id} again`);
      else log('warn', `the container of ${dep.subdomain} did not come back; starting a fresh one from build ${live.id}`, { err });
    }
  } else {
    image = await imageKept();
  }
  if (image === null) return null;
  const vars = (await deps.configs.buildConfig(live.id)) ?? (await deps.configs.current(dep.id));
  const fresh = await startRelease(engine, releaseTarget(dep, { id: live.id, image, vars }, settings), { timeoutMs, signal, engineTurn });
  if (old !== null) await engine.removeContainer(old.id).catch(() => undefined);
  return fresh;
}
