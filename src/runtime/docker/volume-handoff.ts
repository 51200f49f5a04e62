// A named volume has one writer at a time: a set's service that mounts one starts only once the deployment's other containers holding it are stopped, and they start again if the new set fails.
import { LABEL_DEPLOYMENT, LABEL_INSTANCE, LABEL_MANAGED, type ContainerEngine } from '../engine.js';

/** Seconds a holder gets to shut down cleanly (a database flushes its data) before it is killed. */
export const HANDOFF_STOP_SECONDS = 10;

/**
 * The containers a runtime stopped to hand their volume over to a starting set, in this process:
 * they are not lost (the watcher must not start them again, which would make two writers) and
 * their exit is not a crash.
 */
export class HandedOver {
  /** Stopped for a hand-over and not started again. */
  readonly #held = new Set<string>();
  /** When each was stopped (its exit then is no crash), kept a while after it runs again. */
  readonly #stoppedAt = new Map<string, number>();

  /** Whether `id` is stopped for a hand-over now. */
  held(id: string): boolean {
    return this.#held.has(id);
  }

  /** Whether the exit of `id` at `atMs` was a hand-over's stop. */
  stoppedBy(id: string, atMs: number): boolean {
    const at = this.#stoppedAt.get(id);
    return at !== undefined && atMs >= at - 1000 && atMs <= at + (HANDOFF_STOP_SECONDS + 5) * 1000;
  }

  add(id: string): void {
    this.#held.add(id);
    this.#stoppedAt.set(id, Date.now());
    // Old entries go: an exit a few minutes old is long past every look of the watcher.
    for (const [old, at] of this.#stoppedAt) {
      if (at >= Date.now() - 3_600_000) continue;
      this.#stoppedAt.delete(old);
      this.#held.delete(old);
    }
  }

  /** It runs again. */
  release(id: string): void {
    this.#held.delete(id);
  }
}

/** One hand-over in progress: the holders it stopped, to start again if the new set fails. */
export class VolumeHandoff {
  readonly #engine: ContainerEngine;
  readonly #ledger: HandedOver;
  readonly #stopped: string[] = [];

  constructor(engine: ContainerEngine, ledger: HandedOver) {
    this.#engine = engine;
    this.#ledger = ledger;
  }

  /**
   * Stops the deployment's running containers, other than `exclude` (the new set's own), that
   * mount any of `volumes` read-write. Says which, through `say`.
   */
  async take(ids: { instanceId: string; deploymentId: string }, volumes: readonly string[], exclude: ReadonlySet<string>, say: (text: string) => void): Promise<void> {
    if (volumes.length === 0) return;
    const wanted = new Set(volumes);
    const labels = { [LABEL_MANAGED]: 'true', [LABEL_INSTANCE]: ids.instanceId, [LABEL_DEPLOYMENT]: ids.deploymentId };
    const holders = (await this.#engine.listContainers(labels)).filter(
      (c) => c.state !== 'exited' && c.state !== 'created' && !exclude.has(c.id) && (c.volumes ?? []).some((v) => wanted.has(v)),
    );
    for (const holder of holders) {
      say(`==> stopping ${holder.name}: it holds the volume the next service mounts (one writer at a time)\n`);
      // Recorded first: the watcher never sees the stop as a crash to recover.
      this.#ledger.add(holder.id);
      this.#stopped.push(holder.id);
      await this.#engine.stopContainer(holder.id, HANDOFF_STOP_SECONDS);
    }
  }

  /** Whether it stopped any holder. */
  get tookAny(): boolean {
    return this.#stopped.length > 0;
  }

  /** The failed set's containers stopped cleanly before they are removed: none leaves the volume half-written or locked. */
  async stopCleanly(ids: readonly string[]): Promise<void> {
    await Promise.all(ids.map((id) => this.#engine.stopContainer(id, HANDOFF_STOP_SECONDS).catch(() => undefined)));
  }

  /** The new set failed: the holders stopped for it run again (their release serves on). */
  async giveBack(say: (text: string) => void): Promise<void> {
    for (const id of this.#stopped) {
      try {
        await this.#engine.startContainer(id);
        say(`==> started the previous release's container ${id.slice(0, 12)} again\n`);
      } catch (err) {
        say(`==> could not start the previous release's container ${id.slice(0, 12)} again: ${err instanceof Error ? err.message : String(err)}\n`);
      } finally {
        this.#ledger.release(id);
      }
    }
  }
}
