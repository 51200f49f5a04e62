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
