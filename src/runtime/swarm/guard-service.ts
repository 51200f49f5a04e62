// Keeps the node guard's global service as Slipway wants it: created or updated at start and every minute after (new nodes, a new image), removed when turned off.
import type Dockerode from 'dockerode';
import { statusCode } from '../docker/engine-calls.js';
import { buildGuardImage, contentHash, guardImageFiles, type ImageFile } from './guard-image.js';
import { GUARD_SERVICE, LABEL_GUARD, LABEL_GUARD_SPEC, guardAddresses, guardPorts, guardServiceSpec } from './node-guard.js';
import { pushImage, registryAuth, type RegistrySettings } from './registry-push.js';
import { nodeAddress, updateAtVersion, type SwarmNode, type SwarmService } from './swarm-service.js';

type Log = (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;

export interface NodeGuardOptions {
  readonly docker: Dockerode;
  readonly registry: RegistrySettings;
  /** Resolves once the registry answers (Slipway's own); none: pushed at once. */
  readonly registryReady?: ((signal: AbortSignal) => Promise<void>) | undefined;
  /** The static busybox the image holds (SLIPWAY_SWARM_PROBE, on this host too). */
  readonly busybox: string;
  /** SLIPWAY_SWARM_GUARD: false removes the guard's service instead. */
  readonly enabled: boolean;
  readonly log: Log;
}

/** How often the service is looked at again (a node that joined is named in the rules from then on). */
export const GUARD_RECHECK_MS = 60_000;
const RECONCILE_TIMEOUT_MS = 5 * 60_000;
const STOP_WAIT_MS = 10_000;

async function inspectGuard(docker: Dockerode): Promise<SwarmService | undefined> {
  try {
    const service = (await docker.getService(GUARD_SERVICE).inspect()) as SwarmService;
    // A service of that name that is not the guard is not Slipway's to touch.
    if (service.Spec?.Labels?.[LABEL_GUARD] !== 'true') throw new Error(`a service named ${GUARD_SERVICE} exists that is not Slipway's node guard`);
    return service;
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

/** Creates, updates or (turned off) removes the guard's service; does nothing when its spec is as wanted. Resolves with what it did. */
export async function reconcileNodeGuard(options: NodeGuardOptions, files: readonly ImageFile[], hash: string, signal: AbortSignal): Promise<'created' | 'updated' | 'removed' | 'unchanged'> {
  const { docker } = options;
  const existing = await inspectGuard(docker);
  if (!options.enabled) {
    if (existing === undefined) return 'unchanged';
    await docker.getService(existing.ID).remove().catch((err: unknown) => {
      if (statusCode(err) !== 404) throw err;
    });
    return 'removed';
  }
  const nodes = guardAddresses(((await docker.listNodes()) as SwarmNode[]).map(nodeAddress));
  const image = `${options.registry.address.replace(/\/+$/, '')}/${GUARD_SERVICE}:${hash}`;
  const spec = guardServiceSpec({ image, nodes, ports: guardPorts(options.registry.address) });
  if (existing !== undefined && existing.Spec?.Labels?.[LABEL_GUARD_SPEC] === spec.Labels?.[LABEL_GUARD_SPEC]) return 'unchanged';
  // The image: built on this engine once per content, pushed (again: cheap when the registry has it) before nodes pull it.
  const local = `${GUARD_SERVICE}:${hash}`;
  const built = await docker.getImage(local).inspect().then(() => true, (err: unknown) => {
    if (statusCode(err) === 404) return false;
    throw err;
  });
  if (!built) await buildGuardImage(docker, files, local, signal);
  await options.registryReady?.(signal);
  await pushImage(docker, local, image, options.registry, signal);
  const auth = registryAuth(options.registry);
  if (existing === undefined) {
    try {
      await docker.createService({ ...spec, authconfig: auth } as unknown as Dockerode.CreateServiceOptions);
      return 'created';
    } catch (err) {
      // Another instance created it meanwhile: the next look compares its spec.
      if (statusCode(err) === 409) return 'unchanged';
      throw err;
    }
  }
  const updated = await updateAtVersion(
    () => inspectGuard(docker),
    (current) => docker.getService(current.ID).update({ _query: { version: current.Version?.Index ?? 0 }, _body: spec, authconfig: auth } as unknown as Dockerode.ServiceSpec & { version: number }),
  );
  if (updated === undefined) throw new Error('the guard service went away during its update');
  return 'updated';
}

/** Keeps the guard in place from now on (at once, then every GUARD_RECHECK_MS) until stopped; failures are logged, never thrown. */
export function startNodeGuard(options: NodeGuardOptions): { stop: () => Promise<void> } {
  const controller = new AbortController();
  let files: { files: ImageFile[]; hash: string } | undefined;
  let timer: NodeJS.Timeout | undefined;
  const once = async (): Promise<void> => {
    try {
      const signal = AbortSignal.any([controller.signal, AbortSignal.timeout(RECONCILE_TIMEOUT_MS)]);
      if (files === undefined && options.enabled) {
        const list = await guardImageFiles(options.busybox);
        files = { files: list, hash: await contentHash(list) };
      }
      const done = await reconcileNodeGuard(options, files?.files ?? [], files?.hash ?? '', signal);
      if (done !== 'unchanged') options.log('info', `node guard service ${done}`);
    } catch (err) {
      if (!controller.signal.aborted) options.log('error', 'the node guard could not be set up: containers may reach other deployments\' replicas on their nodes', { err });
    }
  };
  const loop = (): void => {
    if (controller.signal.aborted || !options.enabled) return;
    timer = setTimeout(() => {
      running = once().finally(loop);
    }, GUARD_RECHECK_MS);
    timer.unref();
  };
  let running: Promise<void> = once().finally(loop);
  return {
    stop: async () => {
      controller.abort();
      clearTimeout(timer);
      // An engine call in flight takes no signal: the stop waits for it a little, not for ever.
      let bound: NodeJS.Timeout | undefined;
      await Promise.race([running, new Promise<void>((resolve) => (bound = setTimeout(resolve, STOP_WAIT_MS)))]);
      clearTimeout(bound);
    },
  };
}
