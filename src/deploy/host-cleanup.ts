// What an installation leaves on the engine's host once no server runs: its networks (and with them their firewall chains).
import type { ContainerEngine } from '../runtime/engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED, buildNetworkName } from '../runtime/engine.js';

export interface NetworkCleanup {
  /** Networks removed (an app network's per-bridge firewall chains go with it). */
  readonly removed: string[];
  /** Networks kept, with why. */
  readonly kept: { name: string; reason: string }[];
  /** Containers removed first (only with `removeContainers`). */
  readonly removedContainers: number;
}

/**
 * Removes this installation's networks that nothing needs: the build network (no build runs once
 * the server has stopped), and the app network when no container of the installation is left (a
 * running app keeps its network and its firewall: it must stay confined). With `removeContainers`,
 * the installation's containers are removed first (apps stop; their images, volumes and records
 * stay, and the next start runs them again from their images). Never touches another
 * installation's objects; a network the engine refuses to remove (still in use) is reported as kept.
 */
export async function removeIdleNetworks(
  engine: ContainerEngine,
  instanceId: string,
  options: { removeContainers?: boolean } = {},
): Promise<NetworkCleanup> {
  const mine = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId };
  let containers = await engine.listContainers(mine);
  let removedContainers = 0;
  if (options.removeContainers === true) {
    for (const container of containers) {
      await engine.removeContainer(container.id);
      removedContainers += 1;
    }
    containers = await engine.listContainers(mine);
  }
  const removed: string[] = [];
  const kept: { name: string; reason: string }[] = [];
  // Both networks carry the installation's labels (the build network and the app network).
  for (const { name } of await engine.listNetworks(mine)) {
    if (name !== buildNetworkName(instanceId) && containers.length > 0) {
      kept.push({ name, reason: `${containers.length} container(s) of this installation use it` });
      continue;
    }
    try {
      await engine.removeNetwork(name);
      removed.push(name);
    } catch (err) {
      kept.push({ name, reason: err instanceof Error ? err.message : String(err) });
    }
  }
  return { removed, kept, removedContainers };
}

/**
 * A clean stop's {@link removeIdleNetworks}: the build network, and the app network when no app
 * container is left. Bounded: an engine that does not answer within `timeoutMs` does not hold the
 * stop (`slipway server cleanup` does it later).
 */
export async function releaseNetworksOnStop(
  engine: ContainerEngine,
  instanceId: string,
  log: (level: 'info' | 'warn', msg: string, detail?: object) => void,
  timeoutMs = 10_000,
): Promise<void> {
  const done = removeIdleNetworks(engine, instanceId).then(
    (result) => {
      for (const { name, reason } of result.kept) log('info', `kept network ${name}: ${reason}`);
    },
    (err: unknown) => log('warn', "could not remove the installation's networks on stop (slipway server cleanup removes them)", { err }),
  );
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}
