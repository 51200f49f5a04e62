// A page of a list (decisions §14): what a list use-case is asked for and what it answers.

/** Where a page starts: after this position in the list's order (the last item of the previous page). */
export type Position = readonly (string | number)[];

/** A page to read: at most `limit` items, after `after` (the first page when undefined). */
export interface PageRequest<P extends Position> {
  readonly limit: number;
  readonly after: P | undefined;
}

/** One page: its items, and the position after which the next page starts when more follow. */
export interface Page<T, P extends Position> {
  readonly items: T[];
  readonly next: P | undefined;
}

/**
 * A page from rows read with `limit + 1`: the extra row only says that more follow, and the next
 * page starts after the last row kept.
 */
export function pageFromRows<T, P extends Position>(rows: T[], limit: number, positionOf: (row: T) => P): Page<T, P> {
  if (rows.length <= limit) return { items: rows, next: undefined };
  const items = rows.slice(0, limit);
  return { items, next: positionOf(items[items.length - 1] as T) };
}

/** Orders two positions of strings item by item (code-unit order, as cursors compare them). */
function comparePositions(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    const x = a[i] ?? '';
    const y = b[i] ?? '';
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/**
 * A page of a short list read whole (a deployment's jobs, a user's channels): sorted by
 * `positionOf` (oldest first), the items after the request's position, at most `limit`.
 */
export function pageFromList<T, P extends readonly string[]>(items: readonly T[], page: PageRequest<P>, positionOf: (item: T) => P): Page<T, P> {
  const sorted = [...items].sort((a, b) => comparePositions(positionOf(a), positionOf(b)));
  const after = page.after;
  const rest = after === undefined ? sorted : sorted.filter((item) => comparePositions(positionOf(item), after) > 0);
  return pageFromRows(rest.slice(0, page.limit + 1), page.limit, positionOf);
}
