// A release's id under `docker`: its containers' ids, by service, with its set's network; a single-image release keeps the plain form `id,id`.

/** One service's containers in a release, in replica order. */
export interface ReleaseGroup {
  /** The service's name; null for the single-image form. */
  readonly service: string | null;
  readonly web: boolean;
  readonly ids: readonly string[];
}

export interface ParsedReleaseId {
  /** The set's own network (null: a single image, on the apps' network alone). */
  readonly network: string | null;
  /** In start order. */
  readonly groups: readonly ReleaseGroup[];
}

const SET_PREFIX = 'set:';

/** `set:<network>;<service>=<ids>;…;*<web>=<ids>` (start order, `*` marks the web service), or the plain form for a single image. */
export function formatReleaseId(network: string | null, groups: readonly ReleaseGroup[]): string {
  if (network === null && groups.length === 1 && groups[0]?.service === null) return groups[0].ids.join(',');
  return `${SET_PREFIX}${network ?? ''};${groups.map((g) => `${g.web ? '*' : ''}${g.service ?? 'web'}=${g.ids.join(',')}`).join(';')}`;
}

export function parseReleaseId(id: string): ParsedReleaseId {
  if (!id.startsWith(SET_PREFIX)) return { network: null, groups: [{ service: null, web: true, ids: id.split(',').filter((c) => c !== '') }] };
  const [network, ...parts] = id.slice(SET_PREFIX.length).split(';');
  return {
    network: network === undefined || network === '' ? null : network,
    groups: parts.map((part) => {
      const eq = part.indexOf('=');
      const name = part.slice(0, eq);
      const web = name.startsWith('*');
      return { service: web ? name.slice(1) : name, web, ids: part.slice(eq + 1).split(',').filter((c) => c !== '') };
    }),
  };
}

/** Every container of the release (all services, start order). */
export function allContainerIds(id: string): string[] {
  return parseReleaseId(id).groups.flatMap((g) => g.ids);
}

/** The web service's containers: those that serve the subdomain. */
export function webContainerIds(id: string): string[] {
  return parseReleaseId(id).groups.filter((g) => g.web).flatMap((g) => g.ids);
}
