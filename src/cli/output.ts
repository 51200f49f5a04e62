// Printing results: JSON for scripts, aligned tables and key/value blocks for people, streamed logs.
import type { CliIo, OutStream } from './cli-io.js';

/** Prints `value` as pretty JSON (the API's answer, unchanged). */
export function printJson(out: OutStream, value: unknown): void {
  out.write(`${JSON.stringify(value ?? null, null, 2)}\n`);
}

export interface Column<T> {
  readonly header: string;
  readonly value: (row: T) => string;
}

/** Prints rows as a table with an upper-case header and columns padded to their widest cell. */
export function printTable<T>(out: OutStream, rows: readonly T[], columns: ReadonlyArray<Column<T>>): void {
  const cells = [columns.map((c) => c.header.toUpperCase()), ...rows.map((row) => columns.map((c) => oneLine(c.value(row))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i]?.length ?? 0)));
  for (const line of cells) {
    out.write(`${line.map((cell, i) => (i === line.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd()}\n`);
  }
}

/** Prints `label: value` lines with the values aligned. */
export function printFields(out: OutStream, fields: ReadonlyArray<readonly [string, string]>): void {
  const width = Math.max(...fields.map(([label]) => label.length)) + 1;
  for (const [label, value] of fields) out.write(`${`${label}:`.padEnd(width)} ${oneLine(value)}\n`);
}

/** `3m ago`, `2h ago`, `5d ago`; the date itself past a month; `-` for null. */
export function ago(iso: string | null | undefined, now: number = Date.now()): string {
  if (iso === null || iso === undefined) return '-';
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso;
  const seconds = Math.max(0, Math.round((now - then) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h ago`;
  if (seconds < 30 * 86_400) return `${Math.floor(seconds / 86_400)}d ago`;
  return iso.slice(0, 10);
}

/** A value as one word of a command line to copy (single-quoted for a POSIX shell when it needs it: a name with spaces). */
export function commandWord(value: string): string {
  return /^[A-Za-z0-9_.@%+=:,\/-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The first 8 characters of an id, as `git` shortens hashes. */
export function shortId(id: string | null | undefined): string {
  return id === null || id === undefined ? '-' : id.slice(0, 8);
}

/** Copies a text stream to stdout (as JSON lines with `json`). */
export async function copyStream(io: Pick<CliIo, 'stdout'>, chunks: AsyncIterable<string>, json: boolean): Promise<void> {
  let pending = '';
  for await (const chunk of chunks) {
    if (!json) {
      if (!io.stdout.write(chunk)) await new Promise((resolve) => io.stdout.once('drain', resolve));
      continue;
    }
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) io.stdout.write(`${JSON.stringify({ line })}\n`);
  }
  if (json && pending !== '') io.stdout.write(`${JSON.stringify({ line: pending })}\n`);
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ');
}

/** Bytes as people read them. */
export function humanBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}
