// The service-host port: where long-lived services (managed databases) run — the one engine's containers, or a swarm service pinned to one node.
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { ContainerEngine, ContainerInfo } from './engine.js';
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED } from './engine.js';
import { ensureServiceNetwork, removeService, runService, serviceContainer, serviceNetworkName, type ServiceSpec } from './service.js';

/**
 * Opens one byte stream to a service's port (a TCP connection, or a relay inside its container).
 * `onread`: net's option of the same name, for a TCP connection (a stream that is not a socket
 * ignores it and emits 'data').
 */
export type ServiceDialer = (onread?: net.OnReadOpts) => Duplex;

/**
 * What the managed-database room needs from whatever runs its services. Every service's
 * container is on the engine Slipway talks to (under swarm the service is pinned to that node, where
 * its volume is), so exec, dumps and restores go through that engine under both runtimes.
 */
export interface ServiceHost {
  /** Runs the service (network and volume made if missing, any earlier run replaced) and resolves with its running container. */
  run(spec: ServiceSpec): Promise<ContainerInfo>;
  /** The service's container: the running one if any, else its latest; undefined when there is none. */
  container(instanceId: string, serviceId: string): Promise<ContainerInfo | undefined>;
  /** Stops the service; its data stays in its volume. Ignores what is gone. */
  stop(instanceId: string, serviceId: string, timeoutSeconds: number): Promise<void>;
  /** Removes the service, its network and its volume (its data). Linked apps must be detached first. */
  remove(instanceId: string, serviceId: string): Promise<void>;
  /** The service's own network (made when missing): apps linked to it join it and reach it by its alias. */
  network(instanceId: string, serviceId: string, subnetPool: string): Promise<string>;
  /** Takes the apps of `deploymentIds` off the service's network now. */
  detach(instanceId: string, serviceId: string, deploymentIds: readonly string[]): Promise<void>;
  /** How the control plane reaches `port` of the running service; null when it does not run. */
  dialer(instanceId: string, serviceId: string, port: number, timeoutMs: number): Promise<ServiceDialer | null>;
}

/** Services as containers on the one engine (SLIPWAY_RUNTIME=docker): the control plane dials them on their network. */
export function engineServiceHost(engine: ContainerEngine): ServiceHost {
  return {
    run: (spec) => runService(engine, spec),
    container: (instanceId, serviceId) => serviceContainer(engine, instanceId, serviceId),
    stop: async (instanceId, serviceId, timeoutSeconds) => {
      const container = await serviceContainer(engine, instanceId, serviceId);
      if (container !== undefined) await engine.stopContainer(container.id, timeoutSeconds);
    },
    remove: (instanceId, serviceId) => removeService(engine, instanceId, serviceId),
    network: (instanceId, serviceId, subnetPool) => ensureServiceNetwork(engine, instanceId, serviceId, subnetPool),
    detach: async (instanceId, serviceId, deploymentIds) => {
      const network = serviceNetworkName(instanceId, serviceId);
      for (const deploymentId of deploymentIds) {
        const containers = await engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId, [LABEL_DEPLOYMENT]: deploymentId });
        for (const container of containers) await engine.disconnectNetwork?.(network, container.id);
      }
    },
    dialer: async (instanceId, serviceId, port, timeoutMs) => {
      const container = await serviceContainer(engine, instanceId, serviceId);
      const host = container === undefined ? null : ((await engine.containerAddress?.(container.id, serviceNetworkName(instanceId, serviceId))) ?? null);
      if (host === null) return null;
      return (onread) => {
        // No Nagle delay: a database's small request-answer turns (pgbench -S) must not wait for ACKs.
        const tcp = net.connect({ host, port, timeout: timeoutMs, noDelay: true, ...(onread === undefined ? {} : { onread }) });
        tcp.once('connect', () => tcp.setTimeout(0));
        tcp.once('timeout', () => tcp.destroy());
        return tcp;
      };
    },
  };
}
