// An app's health beside its status: whether its live release keeps crashing, from the exits the runtime reports.

export type HealthState = 'ok' | 'crash_loop' | 'unhealthy';

/** The `health` object of a deployment (decisions keep `status`; this says what status cannot). */
export interface AppHealth {
  state: HealthState;
  /** Restarts after a crash in the current episode (0 when ok). */
  restarts: number;
  /** The exit code of the latest crash; null when none was seen. */
  last_exit_code: number | null;
  /** The app's last output line before that crash; null when none was seen. */
  last_line: string | null;
  /** When the episode began (its first crash), ISO 8601; null when ok. */
  since: string | null;
}

export const HEALTH_OK: AppHealth = Object.freeze({ state: 'ok', restarts: 0, last_exit_code: null, last_line: null, since: null }) as AppHealth;

/** This many crashes in one episode make a crash loop (fewer: `unhealthy`, a crash the engine recovered from so far). */
export const CRASH_LOOP_EXITS = 3;
/**
 * An episode ends after this long without a crash. Longer than the engine's longest restart delay
 * (Docker doubles it up to one minute), so a loop slowed down by the delay stays one episode.
 */
export const EPISODE_QUIET_MS = 2 * 60_000;

/** One exit of a release's container, as the runtime reports it. */
export interface ReleaseExit {
  /** Names the exit (the replica and the runtime's time of it): an exit read twice counts once. */
  readonly key: string;
  readonly exitCode: number;
  /** Milliseconds since the epoch. */
  readonly at: number;
}

interface Episode {
  releaseId: string;
  first: number;
  last: number;
  exits: number;
  exitCode: number | null;
  lastLine: string | null;
  announced: boolean;
}

/**
 * The crash episodes of live releases, one per deployment. Pure: the caller feeds exits and the
 * time, and asks for each deployment's health. A new release (another release id) starts afresh.
 */
export class CrashTracker {
  readonly #episodes = new Map<string, Episode>();

  /**
   * Records `exits` of `releaseId` (the deployment's live release). Answers true when the episode
   * just became a crash loop (the moment to announce it, once per episode).
   */
  record(deploymentId: string, releaseId: string, exits: readonly ReleaseExit[]): boolean {
    if (exits.length === 0) return false;
    let episode = this.#episodes.get(deploymentId);
    const sorted = [...exits].sort((a, b) => a.at - b.at);
    for (const exit of sorted) {
      if (episode === undefined || episode.releaseId !== releaseId || exit.at - episode.last > EPISODE_QUIET_MS) {
        episode = { releaseId, first: exit.at, last: exit.at, exits: 0, exitCode: null, lastLine: null, announced: false };
        this.#episodes.set(deploymentId, episode);
      }
      episode.exits += 1;
      episode.last = Math.max(episode.last, exit.at);
      episode.exitCode = exit.exitCode;
    }
    if (episode === undefined || episode.announced || episode.exits < CRASH_LOOP_EXITS) return false;
    episode.announced = true;
    return true;
  }

  /** Sets the last output line of the deployment's current episode. */
  setLastLine(deploymentId: string, line: string | null): void {
    const episode = this.#episodes.get(deploymentId);
    if (episode !== undefined) episode.lastLine = line;
  }

  /** The deployment's health at `now` for its live release `releaseId` (ok when it has no recent crash). */
  health(deploymentId: string, releaseId: string | undefined, now: number): AppHealth {
    const episode = this.#episodes.get(deploymentId);
    if (episode === undefined || episode.releaseId !== releaseId || now - episode.last > EPISODE_QUIET_MS) return HEALTH_OK;
    return {
      state: episode.exits >= CRASH_LOOP_EXITS ? 'crash_loop' : 'unhealthy',
      restarts: episode.exits,
      last_exit_code: episode.exitCode,
      last_line: episode.lastLine,
      since: new Date(episode.first).toISOString(),
    };
  }

  /** Forgets deployments that have no live release any more (deleted, stopped, replaced). */
  keepOnly(live: ReadonlyMap<string, string>): void {
    for (const [deploymentId, episode] of this.#episodes) {
      if (live.get(deploymentId) !== episode.releaseId) this.#episodes.delete(deploymentId);
    }
  }
}

/**
 * The one-line account of an unhealthy app shown by the dashboard and the CLI:
 * `Crashed — restarting (exit 3: boom)`; empty when it is ok.
 */
export function healthSummary(health: AppHealth | undefined): string {
  if (health === undefined || health.state === 'ok') return '';
  const exit = health.last_exit_code === null ? '' : `exit ${health.last_exit_code}`;
  const line = health.last_line === null || health.last_line === '' ? '' : health.last_line;
  const detail = [exit, line].filter((part) => part !== '').join(': ');
  const head = health.state === 'crash_loop' ? 'Crashed — restarting' : 'Restarted after a crash';
  return detail === '' ? head : `${head} (${detail})`;
}

/** What the API reads of health: one deployment's, and a version that changes with any of them. */
export interface HealthReader {
  of(deploymentId: string): AppHealth;
  readonly version: number;
}
