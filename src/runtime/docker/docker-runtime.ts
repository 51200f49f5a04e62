// The docker runtime: a release is `replicas` containers on one engine, each published on loopback.
import { appPort, lastOutput, ReleaseError, waitHealthy } from '../release.js';
import type { ReleaseExit } from '../../domain/app-health.js';
import type { AppRuntime, OneOffOptions, OneOffResult, OneOffTarget, ReleaseState, ReleaseTarget, ReplicaStats, ServiceState, StartedRelease, StartReleaseOptions } from '../app-runtime.js';
import { immediateTurn } from '../app-runtime.js';
import type { ContainerEngine } from '../engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../engine.js';
import { mergeReplicaLogs } from '../replica-logs.js';
import { runOneOff } from './one-off-run.js';
import { allContainerIds, parseReleaseId, webContainerIds } from './set-release-id.js';
import { startSet } from './start-set.js';
import { HandedOver } from './volume-handoff.js';

/** Every container of a release under `docker` (see set-release-id: a single image's are its replicas, in order). */
export function containerIdsOf(releaseId: string): string[] {
  return allContainerIds(releaseId);
}

/** Runs releases as containers on one engine (decisions §5, §16). */
export class DockerRuntime implements AppRuntime {
  readonly #engine: ContainerEngine;
  /** Containers stopped to hand a named volume over to a starting set (start-set.ts). */
  readonly #handedOver = new HandedOver();
  readonly releasesSets = true;

  constructor(engine: ContainerEngine) {
    this.#engine = engine;
  }

  async startRelease(target: ReleaseTarget, options: StartReleaseOptions): Promise<StartedRelease> {
    return startSet(this.#engine, target, options, this.#handedOver);
  }

  async resumeRelease(
    id: string,
    check: { readonly image: string | null; readonly healthCheckPath: string | null },
    options: StartReleaseOptions,
  ): Promise<StartedRelease> {
    const turn = options.engineTurn ?? immediateTurn;
    // The port only names what was waited for in messages; a pruned image must not stop the start.
    const port = check.image === null ? 8080 : await appPort(this.#engine, check.image).catch(() => 8080);
    // A set's other services first, in start order (their health is waited for by the engine's own checks).
    for (const group of parseReleaseId(id).groups) {
      if (group.web) continue;
      for (const containerId of group.ids) {
        const info = await turn(() => this.#engine.startContainer(containerId));
        if (!info.running) throw new ReleaseError(`service "${group.service ?? ''}" did not start again`);
      }
    }
    const healthy = await Promise.all(
      webContainerIds(id).map(async (containerId) => {
        // Starting a running container is a no-op; starting one that is gone throws.
        const info = await turn(() => this.#engine.startContainer(containerId));
        return waitHealthy(this.#engine, info, { port, healthPath: check.healthCheckPath, timeoutMs: options.timeoutMs, signal: options.signal });
      }),
    );
    return { id, upstreams: healthy.map((c) => c.upstream) };
  }

  async inspectReleases(instanceId: string, ids: readonly string[]): Promise<Map<string, ReleaseState>> {
    const out = new Map<string, ReleaseState>();
    if (ids.length === 0) return out;
    const containers = await this.#engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId });
    const byId = new Map(containers.map((c) => [c.id, c]));
    for (const id of ids) {
      const replicas = webContainerIds(id).map((containerId) => byId.get(containerId));
      const all = containerIdsOf(id).map((containerId) => byId.get(containerId));
      if (all.every((c) => c === undefined)) continue;
      out.set(id, {
        id,
        replicas: replicas.length,
        upstreams: replicas.flatMap((c) => (c?.running === true && c.upstream !== null ? [c.upstream] : [])),
        // `restarting`: the engine's restart policy is bringing a crashed replica back; left to the engine.
        // A set's other services count too: one gone means the set must be recovered.
        // One stopped to hand its volume to a starting set is not lost: starting it again would make two writers.
        lost: all.filter((c) => c === undefined || (!c.running && c.state !== 'restarting' && !this.#handedOver.held(c.id))).length,
      });
    }
    return out;
  }

  async releaseServices(instanceId: string, id: string): Promise<ServiceState[]> {
    const containers = await this.#engine.listContainers({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId });
    const byId = new Map(containers.map((c) => [c.id, c]));
    return parseReleaseId(id).groups.map((g) => {
      const running = g.ids.flatMap((containerId) => {
        const c = byId.get(containerId);
        return c?.running === true ? [c] : [];
      });
      const checks = running.map((c) => c.health).filter((h): h is string => h !== undefined);
      const health = checks.length === 0 ? null : checks.includes('unhealthy') ? 'unhealthy' : checks.includes('starting') ? 'starting' : 'healthy';
      return { service: g.service ?? 'web', running: running.length, health };
    });
  }

  async stopRelease(id: string, timeoutSeconds: number): Promise<void> {
    await Promise.all(containerIdsOf(id).map((c) => this.#engine.stopContainer(c, timeoutSeconds)));
  }

  async removeRelease(id: string): Promise<void> {
    await Promise.all(containerIdsOf(id).map((c) => this.#engine.removeContainer(c)));
    const { network } = parseReleaseId(id);
    if (network !== null) await this.#engine.removeNetwork(network);
  }

  releaseLogs(id: string, options: { tail?: number | undefined; follow: boolean; signal: AbortSignal; service?: string | undefined }): AsyncIterable<string> {
    const parsed = parseReleaseId(id);
    const tail = options.tail === undefined ? {} : { tail: options.tail };
    const single = parsed.network === null ? parsed.groups[0]?.ids ?? [] : [];
    if (single.length === 1) return this.#engine.containerLogs(single[0] ?? id, { ...tail, follow: options.follow, signal: options.signal });
    // A set's lines are prefixed `[service]` (decisions §21), its replicas' alike, as under swarm; `service` keeps one service's.
    const members = parsed.groups
      .filter((g) => options.service === undefined || g.service === options.service)
      .flatMap((g) => g.ids.map((containerId, i) => ({ containerId, label: g.service ?? String(i + 1) })));
    const sources = members.map(
      ({ containerId }) => (o: { tail?: number | undefined; follow: boolean; signal: AbortSignal }) =>
        this.#engine.containerLogs(containerId, { ...(o.tail === undefined ? {} : { tail: o.tail }), follow: o.follow, signal: o.signal, timestamps: true }),
    );
    return mergeReplicaLogs(sources, options, members.map((m) => m.label));
  }

  async releaseExits(instanceId: string, ids: readonly string[], sinceMs: number, untilMs: number, signal?: AbortSignal): Promise<Map<string, ReleaseExit[]>> {
    const out = new Map<string, ReleaseExit[]>();
    if (ids.length === 0 || this.#engine.containerExits === undefined) return out;
    const releaseOf = new Map(ids.flatMap((id) => containerIdsOf(id).map((containerId) => [containerId, id] as const)));
    const exits = await this.#engine.containerExits({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId }, sinceMs, untilMs, signal);
    for (const exit of exits) {
      const release = releaseOf.get(exit.id);
      if (release === undefined || this.#handedOver.stoppedBy(exit.id, exit.at)) continue;
      const list = out.get(release) ?? [];
      list.push({ key: `${exit.id}@${exit.atNs}`, exitCode: exit.exitCode, at: exit.at });
      out.set(release, list);
    }
    return out;
  }

  async releaseStats(id: string, signal?: AbortSignal): Promise<ReplicaStats[]> {
    const members = parseReleaseId(id).groups.flatMap((g) => g.ids.map((containerId, i) => ({ containerId, replica: i + 1, service: g.service })));
    const stats = await Promise.all(members.map((m) => this.#engine.containerStats(m.containerId, signal)));
    return stats.flatMap((s, i) => {
      const m = members[i];
      if (s === null || m === undefined) return [];
      return [m.service === null ? { ...s, replica: m.replica } : { ...s, replica: m.replica, service: m.service }];
    });
  }

  runOnce(target: OneOffTarget, options: OneOffOptions): Promise<OneOffResult> {
    return runOneOff(this.#engine, target, options);
  }

  /** The last lines a release's first replica printed (for messages); empty when unavailable. */
  lastOutput(id: string): Promise<string> {
    return lastOutput(this.#engine, webContainerIds(id)[0] ?? id);
  }
}
