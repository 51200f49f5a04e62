// Where an app's HTTP is reached: the address a runtime gives for a release, and a data plane sends to.

/** A TCP address that serves an app's HTTP (the runtime decides which; the data plane dials it). */
export interface Upstream {
  readonly host: string;
  readonly port: number;
}

/** Upstreams as stored (JSON `[{host, port}]`); anything unreadable is none. */
export function parseUpstreams(text: string | null): Upstream[] {
  if (text === null) return [];
  try {
    const value: unknown = JSON.parse(text);
    if (!Array.isArray(value)) return [];
    return value.flatMap((u: unknown) => {
      const { host, port } = (u ?? {}) as { host?: unknown; port?: unknown };
      return typeof host === 'string' && typeof port === 'number' ? [{ host, port }] : [];
    });
  } catch {
    return [];
  }
}

/** Upstreams as stored. */
export function storeUpstreams(upstreams: readonly Upstream[]): string {
  return JSON.stringify(upstreams.map((u) => ({ host: u.host, port: u.port })));
}

/** Whether two lists name the same addresses in the same order. */
export function sameUpstreams(a: readonly Upstream[], b: readonly Upstream[]): boolean {
  return a.length === b.length && a.every((u, i) => u.host === b[i]?.host && u.port === b[i]?.port);
}
