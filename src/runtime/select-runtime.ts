// Which runtime runs the apps (SLIPWAY_RUNTIME, decisions §16): the one engine's containers, or services on the swarm that engine manages.
import type { Config } from '../config.js';
import type { NodeDirectory } from '../domain/nodes.js';
import type { AppRuntime } from './app-runtime.js';
import { createDockerClient, createDockerEngine } from './docker/docker-engine.js';
import { DockerRuntime } from './docker/docker-runtime.js';
import { dockerNodes } from './docker/docker-nodes.js';
import type { ContainerEngine } from './engine.js';
import { engineServiceHost, type ServiceHost } from './service-host.js';
import { startNodeGuard } from './swarm/guard-service.js';
import { startOwnRegistry, type OwnRegistry } from './swarm/own-registry.js';
import { configuredNodeEngines } from './swarm/replica-stats.js';
import { SwarmRuntime } from './swarm/swarm-runtime.js';
import { SwarmServiceHost } from './swarm/swarm-service-host.js';
import { swarmNodes } from './swarm/swarm-nodes.js';

type Log = (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;

export interface SelectedRuntime {
  readonly runtime: AppRuntime;
  readonly nodes: NodeDirectory;
  /** The swarm runtime, under `swarm` (its live watcher and node holds). */
  readonly swarm: SwarmRuntime | undefined;
  /** Slipway's own registry (swarm without SLIPWAY_REGISTRY): it answers before any push; stopped with the server. */
  readonly ownRegistry: OwnRegistry | undefined;
  /** The node guard's upkeep (swarm): stopped with the server (its service and rules stay). */
  readonly guard: { stop: () => Promise<void> } | undefined;
  /** Where managed databases run: the engine's containers, or swarm services pinned to the manager's node. */
  readonly services: ServiceHost;
}

type RuntimeConfig = Pick<Config, 'runtime' | 'dockerHost' | 'registry' | 'registryPort' | 'dataDir' | 'swarmProbePath' | 'swarmNodeEngines' | 'swarmNodeTls' | 'swarmGuard'>;

/** Builds the configured runtime over `engine` (under swarm, first starting Slipway's own registry when none is configured). */
export async function selectRuntime(config: RuntimeConfig, engine: ContainerEngine, instanceId: string, log: Log): Promise<SelectedRuntime> {
  if (config.runtime !== 'swarm') return { runtime: new DockerRuntime(engine), nodes: dockerNodes(engine, instanceId), swarm: undefined, ownRegistry: undefined, guard: undefined, services: engineServiceHost(engine) };
  const manager = createDockerClient(config.dockerHost);
  const ownRegistry = config.registry === undefined ? await startOwnRegistry({ docker: manager, dataDir: config.dataDir, port: config.registryPort, log }) : undefined;
  const images = config.registry ?? { address: ownRegistry?.address ?? '' };
  const registryReady = ownRegistry?.ready.bind(ownRegistry);
  // SLIPWAY_SWARM_NODE_ENGINES: the other nodes' engines, read for the figures of their replicas (docs/swarm.md).
  const tls = config.swarmNodeTls;
  const nodeEngines = config.swarmNodeEngines.length === 0
    ? {}
    : { nodeEngines: configuredNodeEngines(config.swarmNodeEngines, (url) => createDockerEngine(url, {}, url.startsWith('unix://') ? undefined : tls)) };
  if (config.swarmNodeEngines.length === 0) log('info', "SLIPWAY_SWARM_NODE_ENGINES is unset: metrics cover the replicas on the manager's node only");
  const swarm = new SwarmRuntime(manager, engine, { registry: images, probePath: config.swarmProbePath, ...(registryReady === undefined ? {} : { registryReady }), ...nodeEngines, warn: (message) => log('warn', message) });
  // Tenants apart on every node (decisions §16): no container reaches a published port of its node or another's.
  const guard = startNodeGuard({ docker: manager, registry: images, registryReady, busybox: config.swarmProbePath, enabled: config.swarmGuard, log });
  const services = new SwarmServiceHost(manager, engine, { probePath: config.swarmProbePath });
  return { runtime: swarm, nodes: swarmNodes(manager, instanceId), swarm, ownRegistry, guard, services };
}
