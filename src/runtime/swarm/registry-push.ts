// Images reach every node of a swarm through a registry: a build's image tagged per build and pushed there before its service runs it.
import type Dockerode from 'dockerode';
import { followProgress } from '../docker/engine-calls.js';

/** SLIPWAY_REGISTRY (`host[:port][/prefix]`) and its optional credentials. */
export interface RegistrySettings {
  readonly address: string;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
}

/** How long a push may take (the layers of a large image over a slow link). */
const PUSH_TIMEOUT_MS = 10 * 60_000;

/** The registry's name for a build's image: one repository per deployment, tagged with the build's id (never `latest`). */
export function registryRef(registry: RegistrySettings, deploymentId: string, buildId: string): string {
  return `${registry.address.replace(/\/+$/, '')}/slipway-${deploymentId}:${buildId}`;
}

/** The X-Registry-Auth of a push, a service create or an update (nodes pull with it); none without credentials. */
export function registryAuth(registry: RegistrySettings): Record<string, string> | undefined {
  if (registry.username === undefined || registry.password === undefined) return undefined;
  // The server address is the registry's host[:port]; a prefix is part of the repository, not of the login.
  return { username: registry.username, password: registry.password, serveraddress: registry.address.split('/')[0] ?? registry.address };
}

/** Tags `image` (on the manager's engine) as `ref` and pushes it; the local extra tag is dropped after. Throws with the registry's error. */
export async function pushImage(docker: Dockerode, image: string, ref: string, registry: RegistrySettings, signal: AbortSignal): Promise<void> {
  const colon = ref.lastIndexOf(':');
  await docker.getImage(image).tag({ repo: ref.slice(0, colon), tag: ref.slice(colon + 1) });
  try {
    const auth = registryAuth(registry);
    const stream = (await docker.getImage(ref).push({
      ...(auth === undefined ? { authconfig: {} } : { authconfig: auth }),
      abortSignal: AbortSignal.any([signal, AbortSignal.timeout(PUSH_TIMEOUT_MS)]),
    })) as NodeJS.ReadableStream;
    await followProgress(docker, stream, 'push');
  } finally {
    await docker.getImage(ref).remove({ noprune: true }).catch(() => undefined);
  }
}
