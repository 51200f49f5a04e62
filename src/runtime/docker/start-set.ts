// Starting a release on one engine as a set of services: each in depends_on order on the set's own network, the web one published and health-checked, the whole set healthy or nothing left.
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Upstream } from '../../core/upstream.js';
import { immediateTurn, type ReleaseTarget, type StartReleaseOptions, type StartedRelease } from '../app-runtime.js';
import { LABEL_BUILD, LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, appNetworkName, containerName, type ContainerEngine, type VolumeMount } from '../engine.js';
import { ReleaseError, lastLine, lastOutput, startReplica, type WebOfSet } from '../release.js';
import type { SetService } from '../release-set.js';
import { ensureServiceNetwork } from '../service.js';
import { engineVolumeName } from '../volumes.js';
import { formatReleaseId, type ReleaseGroup } from './set-release-id.js';
import { HandedOver, VolumeHandoff } from './volume-handoff.js';

/** The range a set's network takes a /26 of when the target names none (SLIPWAY_DB_SUBNET_POOL's default). */
const DEFAULT_SUBNET_POOL = '10.213.0.0/16';
/** How often a starting service's state is looked at. */
const POLL_MS = 200;

/**
 * Starts `target`: a single image as `replicas` web containers (the set of one), or every service
 * of `target.set` in order. A service waited on with `service_healthy` is healthy before its
 * dependants start; the release is returned only once the web service answers HTTP and every
 * service with a health check is healthy. On any failure or abort, nothing of it is left.
 * A service that mounts a named volume read-write starts only once the deployment's other
 * containers holding that volume are stopped (recorded in `handedOver`); they start again if the set fails.
 */
export async function startSet(engine: ContainerEngine, target: ReleaseTarget, options: StartReleaseOptions, handedOver = new HandedOver()): Promise<StartedRelease> {
  const set = target.set;
  if (set === undefined) {
    const web = await startWebReplicas(engine, target, Math.max(1, target.replicas), options, undefined);
    return { id: formatReleaseId(null, [{ service: null, web: true, ids: web.map((c) => c.id) }]), upstreams: web.map((c) => c.upstream) };
  }
  const say = options.onOutput ?? ((): void => undefined);
  const deadline = Date.now() + options.timeoutMs;
  const groups: ReleaseGroup[] = [];
  let upstreams: Upstream[] = [];
  // Labelled like the deployment's containers: the start-up sweep removes one that no release accounts for.
  const labels = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId, [LABEL_DEPLOYMENT]: target.deploymentId };
  const network = await ensureServiceNetwork(engine, target.instanceId, `set${crypto.randomBytes(5).toString('hex')}`, target.subnetPool ?? DEFAULT_SUBNET_POOL, labels);
  const handoff = new VolumeHandoff(engine, handedOver);
  try {
    for (const service of set.services) {
      options.signal.throwIfAborted();
      const written = service.volumes.filter((v) => !v.readOnly).map((v) => engineVolumeName(target.instanceId, target.deploymentId, `compose-${v.name}`));
      await handoff.take(target, written, new Set(groups.flatMap((g) => g.ids)), say);
      for (const dep of service.dependsOn) {
        if (dep.condition !== 'service_healthy') continue;
        const waited = set.services.find((s) => s.name === dep.service);
        say(`==> service "${service.name}" waits for "${dep.service}" to be healthy\n`);
        await waitServiceReady(engine, waited, groups.find((g) => g.service === dep.service)?.ids ?? [], deadline, options.signal);
      }
      say(`==> starting service "${service.name}" (${service.replicas === 1 ? '' : `${service.replicas} × `}${service.image})\n`);
      if (service.name === set.web) {
        const web = await startWebReplicas(engine, target, service.replicas, options, webOfSet(service, set.port, network, await setVolumes(engine, target, service))).catch((err: unknown) => {
          throw named(service.name, err);
        });
        groups.push({ service: service.name, web: true, ids: web.map((c) => c.id) });
        upstreams = web.map((c) => c.upstream);
      } else {
        const ids: string[] = [];
        groups.push({ service: service.name, web: false, ids });
        for (let i = 0; i < service.replicas; i++) ids.push(await runCompanion(engine, target, service, network, options));
      }
    }
    // The switch waits for every service with a health check, and for every companion still running.
    await Promise.all(set.services.map((s) => waitServiceReady(engine, s, groups.find((g) => g.service === s.name)?.ids ?? [], deadline, options.signal)));
    if (engine.keepRestarting !== undefined) {
      for (const g of groups) if (!g.web) for (const id of g.ids) await engine.keepRestarting(id);
    }
    say(`==> all ${set.services.length} services are up${set.services.some((s) => s.healthcheck !== undefined) ? ' and healthy' : ''}\n`);
    return { id: formatReleaseId(network, groups), upstreams };
  } catch (err) {
    const started = groups.flatMap((g) => g.ids);
    if (handoff.tookAny) await handoff.stopCleanly(started);
    await Promise.all(started.map((id) => engine.removeContainer(id).catch(() => undefined)));
    await engine.removeNetwork(network).catch(() => undefined);
    await handoff.giveBack(say);
    throw err;
  }
}

/** A failure of one service, named. */
function named(service: string, err: unknown): unknown {
  if (!(err instanceof ReleaseError)) return err;
  const last = err.message.startsWith(`${err.reason}; its last line: `) ? err.message.slice(err.reason.length + '; its last line: '.length) : '';
  return new ReleaseError(`service "${service}": ${err.reason}`, last);
}

/** The web containers: started together, each health-checked over HTTP; one failing ends the others. */
async function startWebReplicas(
  engine: ContainerEngine,
  target: ReleaseTarget,
  count: number,
  options: StartReleaseOptions,
  web: WebOfSet | undefined,
): Promise<Array<{ id: string; upstream: Upstream }>> {
  const failed = new AbortController();
  const signal = AbortSignal.any([options.signal, failed.signal]);
  const started = await Promise.allSettled(
    Array.from({ length: count }, async (_, i) => {
      try {
        return await startReplica(engine, target, {
          timeoutMs: options.timeoutMs,
          signal,
          // The build log follows the first replica's output; another's failure still ends with its last line.
          ...(i === 0 && options.onOutput !== undefined ? { onOutput: options.onOutput } : {}),
          engineTurn: options.engineTurn ?? immediateTurn,
          ...(web === undefined ? {} : { web }),
        });
      } catch (err) {
        failed.abort(err);
        throw err;
      }
    }),
  );
  const healthy = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  if (healthy.length === count) {
    if (count > 1) options.onOutput?.(`==> all ${count} replicas answer\n`);
    return healthy;
  }
  await Promise.all(healthy.map((c) => engine.removeContainer(c.id).catch(() => undefined)));
  // The first failure is the reason; the others were ended by it (or by the caller's abort).
  options.signal.throwIfAborted();
  throw failed.signal.reason ?? new ReleaseError('a replica did not start');
}

/** A set's volumes on the engine: the deployment's own (kept across releases, removed with it). */
async function setVolumes(engine: ContainerEngine, target: ReleaseTarget, service: SetService): Promise<VolumeMount[]> {
  const labels = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId, [LABEL_DEPLOYMENT]: target.deploymentId };
  const mounts: VolumeMount[] = [];
  for (const v of service.volumes) {
    const source = engineVolumeName(target.instanceId, target.deploymentId, `compose-${v.name}`);
    await engine.ensureVolume({ name: source, labels });
    mounts.push({ source, target: v.target, readOnly: v.readOnly });
  }
  return mounts;
}

/** What the web service's containers get beyond a single image's. */
function webOfSet(service: SetService, port: number | null, network: string, volumes: VolumeMount[]): WebOfSet {
  return { port, environment: service.environment, run: { ...runOptionsOf(service), aliasedNetwork: { name: network, aliases: [service.name] } }, volumes };
}

function runOptionsOf(service: SetService): WebOfSet['run'] {
  return {
    ...(service.command === undefined ? {} : { command: service.command }),
    ...(service.entrypoint === undefined ? {} : { entrypoint: service.entrypoint }),
    ...(service.workingDir === undefined ? {} : { workingDir: service.workingDir }),
    ...(service.user === undefined ? {} : { user: service.user }),
    ...(service.healthcheck === undefined ? {} : { healthcheck: service.healthcheck }),
  };
}

/** One container of a service other than the web one: on the set's network under its name, published nowhere. */
async function runCompanion(engine: ContainerEngine, target: ReleaseTarget, service: SetService, network: string, options: StartReleaseOptions): Promise<string> {
  return (options.engineTurn ?? immediateTurn)(async () => {
    const apps = appNetworkName(target.instanceId);
    await engine.ensureNetwork({ name: apps, labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId }, isolated: true, confined: true });
    const volumes = await setVolumes(engine, target, service);
    const env = Object.fromEntries([...Object.entries(service.environment), ...target.vars.filter((v) => v.key !== 'PORT').map((v) => [v.key, v.value] as const)]);
    const safe = service.name.toLowerCase().replace(/[^a-z0-9_.-]/g, '-').slice(0, 30);
    const container = await engine.runContainer({
      image: service.image,
      name: `${containerName(target.deploymentId, target.buildId)}-${safe}-${crypto.randomBytes(3).toString('hex')}`,
      labels: { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: target.instanceId, [LABEL_DEPLOYMENT]: target.deploymentId, [LABEL_BUILD]: target.buildId },
      env,
      containerPort: service.ports[0] ?? 80,
      publish: false,
      memoryBytes: target.memoryBytes,
      nanoCpus: target.nanoCpus,
      pidsLimit: target.pidsLimit,
      // The apps' network (no container reaches another there) gives it a way out; the set's network, its peers.
      network: apps,
      aliasedNetwork: { name: network, aliases: [service.name] },
      ...(target.networks === undefined ? {} : { extraNetworks: target.networks }),
      volumes,
      // On trial like the web service: a crash while the set starts fails it with the first run's output.
      restartOnCrash: engine.keepRestarting === undefined,
      ...runOptionsOf(service),
    });
    return container.id;
  });
}

/**
 * Waits until every container of `service` is running and, when it has a health check, healthy.
 * Throws ReleaseError naming the service (with its last output line) when one exits, turns
 * unhealthy, or the deadline passes.
 */
async function waitServiceReady(engine: ContainerEngine, service: SetService | undefined, ids: readonly string[], deadline: number, signal: AbortSignal): Promise<void> {
  if (service === undefined) return;
  const fail = async (id: string, reason: string): Promise<never> => {
    throw new ReleaseError(`service "${service.name}" ${reason}`, lastLine(await lastOutput(engine, id)));
  };
  for (const id of ids) {
    for (;;) {
      signal.throwIfAborted();
      const info = await engine.inspectContainer(id);
      if (info === null) return fail(id, 'disappeared while starting');
      if (!info.running && info.state !== 'created') return fail(id, `exited with code ${info.exitCode ?? 'unknown'} while the release started`);
      if (service.healthcheck === undefined || info.health === 'healthy') break;
      if (info.health === 'unhealthy') return fail(id, 'is unhealthy: its health check failed');
      if (Date.now() >= deadline) return fail(id, `did not become healthy within the start time limit (its health check: ${info.health ?? 'not run yet'})`);
      await sleep(POLL_MS, undefined, { signal });
    }
  }
}
