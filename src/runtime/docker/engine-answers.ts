// The engine's answers in the port's words: containers, networks, exit events and pull failures as Slipway reads them.
import type Dockerode from 'dockerode';
import { EngineBuildError, type ContainerExit, type ContainerInfo, type NetworkOptions } from '../engine.js';
import { registryHost } from '../dockerfile-policy.js';
import { engineMessage } from './engine-calls.js';

/** App ports are published on loopback only (decisions §5): the control plane reaches them there. */
export const PUBLISH_HOST = '127.0.0.1';

/** An existing network must be the kind asked for: an isolated one never silently has ICC on. */
export function checkNetwork(info: Dockerode.NetworkInspectInfo, options: NetworkOptions): { id: string } {
  const icc = info.Options?.['com.docker.network.bridge.enable_icc'];
  if (info.Driver !== 'bridge' || (options.isolated && icc !== 'false')) {
    throw new Error(`network ${options.name} exists but is not an isolated bridge (inter-container communication must be off); remove it`);
  }
  if (options.internal === true && info.Internal !== true) {
    throw new Error(`network ${options.name} exists but is not internal (a database's network has no route out); remove it`);
  }
  // The build firewall matches interfaces by name: a network on another bridge would escape it.
  if (options.bridgeName !== undefined && info.Options?.['com.docker.network.bridge.name'] !== options.bridgeName) {
    throw new Error(`network ${options.name} exists but not on bridge ${options.bridgeName}; remove it`);
  }
  return { id: info.Id };
}

/** The engine's `die` events (one JSON object a line) as exits, oldest first; anything else is skipped. */
export function parseDieEvents(text: string): ContainerExit[] {
  const exits: ContainerExit[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let event: { Action?: unknown; Actor?: { ID?: unknown; Attributes?: Record<string, unknown> }; timeNano?: unknown; time?: unknown };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      continue;
    }
    const id = event.Actor?.ID;
    const code = Number(event.Actor?.Attributes?.['exitCode']);
    if (event.Action !== 'die' || typeof id !== 'string' || !Number.isInteger(code)) continue;
    const atNs = typeof event.timeNano === 'number' ? BigInt(Math.round(event.timeNano)) : BigInt(Number(event.time ?? 0)) * 1_000_000_000n;
    exits.push({ id, exitCode: code, at: Number(atNs / 1_000_000n), atNs: atNs.toString() });
  }
  return exits.sort((a, b) => a.at - b.at);
}

export function labelFilters(labels: Record<string, string>): string[] {
  return Object.entries(labels).map(([key, value]) => `${key}=${value}`);
}

export function fromInspect(info: Dockerode.ContainerInspectInfo): ContainerInfo {
  const state = info.State.Status;
  const running = state === 'running';
  let hostPort: number | null = null;
  for (const bindings of Object.values(info.NetworkSettings?.Ports ?? {})) {
    // The engine answers null for an exposed port that is not published.
    const found = (bindings ?? []).find((b) => b.HostIp === PUBLISH_HOST && b.HostPort !== '');
    if (found !== undefined) {
      hostPort = Number(found.HostPort);
      break;
    }
  }
  return {
    id: info.Id,
    name: info.Name.replace(/^\//, ''),
    running,
    exitCode: running || state === 'created' ? null : info.State.ExitCode,
    hostPort,
    upstream: hostPort === null ? null : { host: PUBLISH_HOST, port: hostPort },
    labels: info.Config?.Labels ?? {},
    state,
    ...(info.State.Health?.Status === undefined || info.State.Health.Status === '' || info.State.Health.Status === 'none' ? {} : { health: info.State.Health.Status }),
  };
}

/** The Linux bridge interface of a network: the engine names a user-defined bridge after its id unless told a name. */
export function bridgeOf(info: Dockerode.NetworkInspectInfo): string {
  return info.Options?.['com.docker.network.bridge.name'] ?? `br-${info.Id.slice(0, 12)}`;
}

/** The engine's words for a registry it could not reach (DNS, connection, TLS, timeout). */
const UNREACHABLE_REGISTRY = /lookup |no such host|dial tcp|i\/o timeout|connection refused|network is unreachable|TLS handshake timeout|Client\.Timeout|server misbehaving/i;

/**
 * A base image that is neither on the engine nor pullable: which image, why, and what the operator
 * can do, as one message (the build log and the build's error carry it once).
 */
export function pullFailure(ref: string, err: unknown): EngineBuildError {
  const detail = engineMessage(err).split('\n')[0]!.slice(0, 300);
  const host = registryHost(ref) ?? 'Docker Hub (registry-1.docker.io)';
  const message = UNREACHABLE_REGISTRY.test(detail)
    ? `the base image ${ref} is not on this server's Docker engine and its registry, ${host}, could not be reached. ` +
      `To build without that registry: give the engine a registry mirror it can reach ("registry-mirrors" in /etc/docker/daemon.json), ` +
      `or put the image on the engine yourself (docker load, or docker build -t ${ref} on the server), then deploy again.`
    : `the base image ${ref} could not be pulled from ${host}: ${detail}`;
  return new EngineBuildError(message, message, { cause: err });
}

