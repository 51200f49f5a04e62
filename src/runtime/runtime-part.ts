// The runtime part: the container engine and the runtime apps run on (one engine, or its swarm), looked at once at start.
import type { Config } from '../config.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import { createDockerEngine } from './docker/docker-engine.js';
import type { ContainerEngine } from './engine.js';
import { selectRuntime, type SelectedRuntime } from './select-runtime.js';

export interface RuntimeOffers extends SelectedRuntime {
  readonly engine: ContainerEngine;
  /** Whether the engine answered at start (deploys fail until it does; recovery plans without it). */
  readonly engineUp: boolean;
}

/** Connects to the engine (or takes the one given: tests) and builds SLIPWAY_RUNTIME's runtime over it (decisions §16). */
export async function runtimePart(config: Config, instanceId: string, log: Log, given?: ContainerEngine): Promise<Part<RuntimeOffers>> {
  const engine =
    given ??
    createDockerEngine(config.dockerHost, {
      // Apps call each other and the API by their public URLs: the edge's ports stay open to them.
      appHostPorts: [config.port, config.https?.port ?? 0],
      warn: (message) => log('warn', message),
    });
  const engineUp = await engine.ping(AbortSignal.timeout(5000)).then(
    () => true,
    (err: unknown) => {
      log('warn', `the Docker engine does not answer (${err instanceof Error ? err.message : String(err)}); deploys will fail until it does`);
      return false;
    },
  );
  const selected = await selectRuntime(config, engine, instanceId, log);
  return {
    offers: { ...selected, engine, engineUp },
    stop: async () => {
      await selected.guard?.stop();
      await selected.ownRegistry?.stop();
    },
  };
}
