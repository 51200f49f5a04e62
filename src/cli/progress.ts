// A progress display on stderr: a redrawn bar on a terminal, a plain line every few seconds otherwise.
import type { OutStream } from './cli-io.js';

const REDRAW_MS = 100;
const PLAIN_EVERY_MS = 2_000;

/** Formats a byte count: `512 B`, `3.4 KiB`, `20.0 MiB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${Math.round(value)} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Shows one operation's progress in bytes (with a bar when the total is known) and its rate. */
export class Progress {
  readonly #out: OutStream;
  readonly #label: string;
  readonly #total: number | undefined;
  readonly #started: number;
  readonly #now: () => number;
  #current = 0;
  #lastDraw = 0;
  #finished = false;

  constructor(out: OutStream, label: string, total?: number, now: () => number = Date.now) {
    this.#out = out;
    this.#label = label;
    this.#total = total;
    this.#now = now;
    this.#started = now();
    this.#lastDraw = this.#started;
  }

  /** Records progress; redraws at most every 100 ms on a TTY, every 2 s otherwise. */
  update(current: number): void {
    this.#current = current;
    const now = this.#now();
    const tty = this.#out.isTTY === true;
    if (now - this.#lastDraw < (tty ? REDRAW_MS : PLAIN_EVERY_MS)) return;
    this.#lastDraw = now;
    if (tty) this.#out.write(`\r${this.#line(now)}\x1b[K`);
    else this.#out.write(`${this.#line(now)}\n`);
  }

  /** Ends the display with a summary line (`done` true) or by clearing the bar (`done` false). */
  finish(done = true): void {
    if (this.#finished) return;
    this.#finished = true;
    const tty = this.#out.isTTY === true;
    const seconds = Math.max(0.001, (this.#now() - this.#started) / 1000);
    const summary = `${this.#label} ${formatBytes(this.#current)} in ${seconds.toFixed(1)} s (${formatBytes(this.#current / seconds)}/s)`;
    if (tty) this.#out.write(`\r\x1b[K${done ? `${summary}\n` : ''}`);
    else if (done) this.#out.write(`${summary}\n`);
  }

  #line(now: number): string {
    const seconds = Math.max(0.001, (now - this.#started) / 1000);
    const rate = `${formatBytes(this.#current / seconds)}/s`;
    if (this.#total === undefined || this.#total <= 0) return `${this.#label} ${formatBytes(this.#current)}  ${rate}`;
    const ratio = Math.min(1, this.#current / this.#total);
    const width = 24;
    const filled = Math.round(ratio * width);
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
    return `${this.#label} ${bar} ${Math.floor(ratio * 100)}%  ${formatBytes(this.#current)} / ${formatBytes(this.#total)}  ${rate}`;
  }
}
