// The app event port: what happens to apps, databases, jobs, certificates and nodes (contract §23's events), told to whoever subscribed (notifications, logs).

/** An app whose container keeps exiting and being restarted: told once per crash-loop episode, not on every restart. */
export interface AppCrashedEvent {
  readonly type: 'app.crashed';
  readonly deploymentId: string;
  readonly subdomain: string;
  /** The release (runtime id) that crash-loops. */
  readonly releaseId: string;
  /** When the episode began (its first exit), ISO 8601. */
  readonly since: string;
  /** Restarts seen in the episode so far. */
  readonly restarts: number;
  readonly exitCode: number | null;
  /** The app's last output line before it exited (may be a secret's echo: never log it whole). */
  readonly lastLine: string | null;
}

/** A release went live (the route switched to it). */
export interface DeploySucceededEvent {
  readonly type: 'deploy.succeeded';
  readonly deploymentId: string;
  readonly subdomain: string;
  readonly buildId: string;
}

/** A build or its release failed; the previous release (if any) keeps serving. */
export interface DeployFailedEvent {
  readonly type: 'deploy.failed';
  readonly deploymentId: string;
  readonly subdomain: string;
  readonly buildId: string;
  /** The failure as the build page shows it (already redacted). */
  readonly message: string;
}

/** A backup that failed (taking, uploading or verifying it) or could not be verified. */
export interface BackupFailedEvent {
  readonly type: 'backup.failed';
  readonly databaseId: string;
  readonly databaseName: string;
  readonly backupId: string;
  /** The step that failed (e.g. `dump`, `upload`, `verify`, `instance lost`). */
  readonly step: string;
  readonly message: string;
}

/** A backup restored into a throwaway container and passed the checks. */
export interface BackupVerifiedEvent {
  readonly type: 'backup.verified';
  readonly databaseId: string;
  readonly databaseName: string;
  readonly backupId: string;
}

/** A scheduled or manual job run that ended `failed` or `timed_out`. */
export interface JobFailedEvent {
  readonly type: 'job.failed';
  readonly deploymentId: string;
  readonly subdomain: string;
  readonly jobId: string;
  readonly jobName: string;
  readonly runId: string;
  readonly status: 'failed' | 'timed_out';
  readonly exitCode: number | null;
}

/** A certificate could not be issued or renewed. */
export interface CertificateFailedEvent {
  readonly type: 'certificate.failed';
  readonly hostname: string;
  /** The deployment the hostname serves, when it is an app's (absent for the platform's own). */
  readonly deploymentId: string | null;
  readonly message: string;
}

/** A swarm node stopped answering (its state went `down`). */
export interface NodeDownEvent {
  readonly type: 'node.down';
  readonly nodeId: string;
  readonly hostname: string;
}

/** Every event of contract §23, produced where it happens and delivered by the notifications room. */
export type AppEvent =
  | DeploySucceededEvent
  | DeployFailedEvent
  | AppCrashedEvent
  | BackupFailedEvent
  | BackupVerifiedEvent
  | JobFailedEvent
  | CertificateFailedEvent
  | NodeDownEvent;
export type AppEventType = AppEvent['type'];
export type AppEventListener<T extends AppEventType> = (event: Extract<AppEvent, { type: T }>) => void;

/**
 * A small synchronous event emitter: listeners run in subscription order, and one that throws is
 * reported to `onError` without stopping the others or the emitter (a failing notification must
 * never stop the watcher that found the crash).
 */
export class AppEvents {
  readonly #listeners = new Map<AppEventType, Array<(event: AppEvent) => void>>();
  readonly #any: Array<(event: AppEvent) => void> = [];
  readonly #onError: (err: unknown, event: AppEvent) => void;

  constructor(onError: (err: unknown, event: AppEvent) => void = () => undefined) {
    this.#onError = onError;
  }

  /** Subscribes to one type of event; returns the unsubscribe. */
  on<T extends AppEventType>(type: T, listener: AppEventListener<T>): () => void {
    const list = this.#listeners.get(type) ?? [];
    const wrapped = listener as (event: AppEvent) => void;
    list.push(wrapped);
    this.#listeners.set(type, list);
    return () => {
      const at = list.indexOf(wrapped);
      if (at >= 0) list.splice(at, 1);
    };
  }

  /** Subscribes to every type of event (the notifications room); returns the unsubscribe. */
  onAny(listener: (event: AppEvent) => void): () => void {
    const list = this.#any;
    list.push(listener);
    return () => {
      const at = list.indexOf(listener);
      if (at >= 0) list.splice(at, 1);
    };
  }

  emit(event: AppEvent): void {
    for (const listener of [...(this.#listeners.get(event.type) ?? []), ...this.#any]) {
      try {
        listener(event);
      } catch (err) {
        this.#onError(err, event);
      }
    }
  }
}
