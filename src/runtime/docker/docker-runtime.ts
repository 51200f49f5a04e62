// The docker runtime: a release is `replicas` containers on one engine, each published on loopback.
import { appPort, lastOutput, ReleaseError, startReplica, waitHealthy } from '../release.js';
import type { ReleaseExit } from '../../domain/app-health.js';
import type { AppRuntime, OneOffOptions, OneOffResult, OneOffTarget, ReleaseState, ReleaseTarget, ReplicaStats, StartedRelease, StartReleaseOptions } from '../app-runtime.js';
import { immediateTurn } from '../app-runtime.js';
import type { ContainerEngine } from '../engine.js';
import { LABEL_INSTANCE, LABEL_MANAGED } from '../engine.js';
import { mergeReplicaLogs } from '../replica-logs.js';
import { runOneOff } from './one-off-run.js';

/** A release's id under `docker`: its containers' ids, in replica order, joined by commas (one id: one container). */
export function containerIdsOf(releaseId: string): string[] {
  return releaseId.split(',').filter((id) => id !== '');
}

/** Runs releases as containers on one engine (decisions §5, §16). */
export class DockerRuntime implements AppRuntime {
  readonly #engine: ContainerEngine;

  constructor(engine: ContainerEngine) {
    this.#engine = engine;
  }

  async startRelease(target: ReleaseTarget, options: StartReleaseOptions): Promise<StartedRelease> {
    const count = Math.max(1, target.replicas);
    // One replica's failure ends the others' waits at once: the release failed.
    const failed = new AbortController();
    const signal = AbortSignal.any([options.signal, failed.signal]);
    const started = await Promise.allSettled(
      Array.from({ length: count }, async (_, i) => {
        try {
          return await startReplica(this.#engine, target, {
            timeoutMs: options.timeoutMs,
            signal,
            // The build log follows the first replica's output; another's failure still ends with its last line.
            ...(i === 0 && options.onOutput !== undefined ? { onOutput: options.onOutput } : {}),
            engineTurn: options.engineTurn ?? immediateTurn,
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
      return { id: healthy.map((c) => c.id).join(','), upstreams: healthy.map((c) => c.upstream) };
    }
    await Promise.all(healthy.map((c) => this.#engine.removeContainer(c.id).catch(() => undefined)));
    // The first failure is the reason; the others were ended by it (or by the caller's abort).
    options.signal.throwIfAborted();
    throw failed.signal.reason ?? new ReleaseError('a replica did not start');
  }

  async resumeRelease(
    id: string,
    check: { readonly image: string | null; readonly healthCheckPath: string | null },
    options: StartReleaseOptions,
  ): Promise<StartedRelease> {
    const turn = options.engineTurn ?? immediateTurn;
    // The port only names what was waited for in messages; a pruned image must not stop the start.
    const port = check.image === null ? 8080 : await appPort(this.#engine, check.image).catch(() => 8080);
    const healthy = await Promise.all(
      containerIdsOf(id).map(async (containerId) => {
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
      const replicas = containerIdsOf(id).map((containerId) => byId.get(containerId));
      if (replicas.every((c) => c === undefined)) continue;
      out.set(id, {
        id,
        replicas: replicas.length,
        upstreams: replicas.flatMap((c) => (c?.running === true && c.upstream !== null ? [c.upstream] : [])),
        // `restarting`: the engine's restart policy is bringing a crashed replica back; left to the engine.
        lost: replicas.filter((c) => c === undefined || (!c.running && c.state !== 'restarting')).length,
      });
    }
    return out;
  }

  async stopRelease(id: string, timeoutSeconds: number): Promise<void> {
    await Promise.all(containerIdsOf(id).map((c) => this.#engine.stopContainer(c, timeoutSeconds)));
  }

  async removeRelease(id: string): Promise<void> {
    await Promise.all(containerIdsOf(id).map((c) => this.#engine.removeContainer(c)));
  }

  releaseLogs(id: string, options: { tail?: number | undefined; follow: boolean; signal: AbortSignal }): AsyncIterable<string> {
    const ids = containerIdsOf(id);
    const tail = options.tail === undefined ? {} : { tail: options.tail };
    if (ids.length === 1) return this.#engine.containerLogs(ids[0] ?? id, { ...tail, follow: options.follow, signal: options.signal });
    const sources = ids.map(
      (containerId) => (o: { tail?: number | undefined; follow: boolean; signal: AbortSignal }) =>
        this.#engine.containerLogs(containerId, { ...(o.tail === undefined ? {} : { tail: o.tail }), follow: o.follow, signal: o.signal, timestamps: true }),
    );
    return mergeReplicaLogs(sources, options);
  }

  async releaseExits(instanceId: string, ids: readonly string[], sinceMs: number, untilMs: number, signal?: AbortSignal): Promise<Map<string, ReleaseExit[]>> {
    const out = new Map<string, ReleaseExit[]>();
    if (ids.length === 0 || this.#engine.containerExits === undefined) return out;
    const releaseOf = new Map(ids.flatMap((id) => containerIdsOf(id).map((containerId) => [containerId, id] as const)));
    const exits = await this.#engine.containerExits({ [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: instanceId }, sinceMs, untilMs, signal);
    for (const exit of exits) {
      const release = releaseOf.get(exit.id);
      if (release === undefined) continue;
      const list = out.get(release) ?? [];
      list.push({ key: `${exit.id}@${exit.atNs}`, exitCode: exit.exitCode, at: exit.at });
      out.set(release, list);
    }
    return out;
  }

  async releaseStats(id: string, signal?: AbortSignal): Promise<ReplicaStats[]> {
    const stats = await Promise.all(containerIdsOf(id).map((c) => this.#engine.containerStats(c, signal)));
    return stats.flatMap((s, i) => (s === null ? [] : [{ ...s, replica: i + 1 }]));
  }

  runOnce(target: OneOffTarget, options: OneOffOptions): Promise<OneOffResult> {
    return runOneOff(this.#engine, target, options);
  }

  /** The last lines a release's first replica printed (for messages); empty when unavailable. */
  lastOutput(id: string): Promise<string> {
    return lastOutput(this.#engine, containerIdsOf(id)[0] ?? id);
  }
}
