// List pages as they were sent, kept by the version of the list they were read at: a repeated list call is one version read.

/** A page as it was answered: the serialized body (UTF-8, sent as it is), its `Link` header (when more items follow) and its entity tag. */
export interface CachedPage {
  readonly body: Buffer;
  readonly link: string | undefined;
  readonly etag: string;
}

/** Most pages one list keeps (a client walking a long list in small pages). */
const MAX_PAGES_PER_LIST = 32;

interface ListEntry {
  version: number;
  bytes: number;
  /** Request URL (path and query) → page, least recently used first. */
  readonly pages: Map<string, CachedPage>;
}

/** Bytes counted for a page: its body, its strings and a little bookkeeping. */
const sizeOf = (url: string, page: CachedPage): number => url.length + page.body.length + (page.link?.length ?? 0) + page.etag.length + 200;

/**
 * A bounded LRU of list pages. A page is stored under its list (kind and owner, e.g.
 * `deployments:<user id>`), the version of the list it was read at, and the request URL (the query
 * holds the limit, the cursor and the other parameters the `next` link keeps). It is served only
 * to a request that read the same version: the version changes in the transaction of every write
 * that changes the list (see `DeploymentCatalog.listVersion`), so a write is seen by the very next
 * call, whichever process made it. Pages of an older version are dropped when a newer one is
 * stored; an answer read at an older version than the one held is not stored.
 */
export class PageCache {
  readonly #maxBytes: number;
  #bytes = 0;
  /** List → its entry, least recently used first. */
  readonly #lists = new Map<string, ListEntry>();

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The page of `list` at `version` for `url`, if held. */
  get(list: string, version: number, url: string): CachedPage | undefined {
    const entry = this.#lists.get(list);
    if (entry === undefined || entry.version !== version) return undefined;
    const page = entry.pages.get(url);
    if (page === undefined) return undefined;
    // Most recently used: last in both maps.
    this.#lists.delete(list);
    this.#lists.set(list, entry);
    entry.pages.delete(url);
    entry.pages.set(url, page);
    return page;
  }

  /** Keeps `page` of `list`, read at `version`, for `url`. */
  set(list: string, version: number, url: string, page: CachedPage): void {
    const size = sizeOf(url, page);
    if (size > this.#maxBytes / 8) return; // one huge page would push out everyone else's
    let entry = this.#lists.get(list);
    if (entry !== undefined && entry.version !== version) {
      if (entry.version > version) return; // read before a write this cache already saw
      this.#drop(list, entry);
      entry = undefined;
    }
    if (entry === undefined) {
      entry = { version, bytes: 0, pages: new Map() };
    } else {
      this.#lists.delete(list);
      const old = entry.pages.get(url);
      if (old !== undefined) {
        entry.pages.delete(url);
        this.#count(entry, -sizeOf(url, old));
      }
    }
    this.#lists.set(list, entry);
    entry.pages.set(url, page);
    this.#count(entry, size);
    while (entry.pages.size > MAX_PAGES_PER_LIST) {
      const [oldest, evicted] = entry.pages.entries().next().value as [string, CachedPage];
      entry.pages.delete(oldest);
      this.#count(entry, -sizeOf(oldest, evicted));
    }
    while (this.#bytes > this.#maxBytes) {
      const [oldest, evicted] = this.#lists.entries().next().value as [string, ListEntry];
      this.#drop(oldest, evicted);
    }
  }

  /** Forgets every page of `list` (e.g. its owner was deleted). */
  delete(list: string): void {
    const entry = this.#lists.get(list);
    if (entry !== undefined) this.#drop(list, entry);
  }

  #count(entry: ListEntry, bytes: number): void {
    entry.bytes += bytes;
    this.#bytes += bytes;
  }

  #drop(list: string, entry: ListEntry): void {
    this.#lists.delete(list);
    this.#bytes -= entry.bytes;
  }
}
