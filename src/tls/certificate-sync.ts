// Certificates on every instance: a change announced by host name (the certificate itself read from the store), plus a periodic resync.
import type { Coordination } from '../deploy/coordination.js';

/** Announcement of a host's certificate change: `<instance> cert:<hostname>`. */
const CERTIFICATE = 'cert:';

/** What the sync drives (the certificate manager). */
export interface SyncedCertificates {
  refresh(hostname: string): Promise<void>;
  resync(): Promise<void>;
}

/** The manager's `announce`: tells the other instances (ids only) that a host's certificate changed. */
export function certificateAnnouncer(coordination: Pick<Coordination, 'announce'>, self: string): (hostname: string) => void {
  return (hostname) => coordination.announce(`${self} ${CERTIFICATE}${hostname}`);
}

export interface CertificateSyncDeps {
  readonly coordination: Pick<Coordination, 'onAnnounce'>;
  readonly certificates: SyncedCertificates;
  readonly self: string;
  readonly resyncMs: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/**
 * Installs each certificate another instance obtained, renewed or dropped (announced), resyncs
 * every `resyncMs` and after the feed reconnects (a notification is not replayed). Returns a stop
 * function. (Renewals on becoming the leader: the leader-only task of edge-certificates.ts.)
 */
export function syncCertificates(deps: CertificateSyncDeps): () => void {
  const { certificates, log } = deps;
  // One at a time, in order.
  let chain: Promise<void> = Promise.resolve();
  const run = (what: string, task: () => Promise<void>): void => {
    chain = chain.then(task).catch((err: unknown) => log('warn', `certificate sync (${what}) failed; the periodic resync repairs it`, { err }));
  };
  const unsubscribe = deps.coordination.onAnnounce((message) => {
    if (message === null) return run('resync', () => certificates.resync());
    const [origin, id] = message.split(' ');
    if (origin === deps.self || id === undefined || !id.startsWith(CERTIFICATE)) return;
    const hostname = id.slice(CERTIFICATE.length);
    run(hostname, () => certificates.refresh(hostname));
  });
  const timer = setInterval(() => run('resync', () => certificates.resync()), deps.resyncMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    unsubscribe();
  };
}
