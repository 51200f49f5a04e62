// The line a crashed app is reported with: its last line, stdout and stderr put back in order as well as the engine allows.
import type { OutputLine } from './engine.js';

/**
 * Lines stamped this close to the last one are taken as written at the same moment: the engine
 * copies stdout and stderr through two pipes, read apart, so their order within such a burst is lost.
 */
export const BURST_NS = 10_000_000n;

/**
 * The last non-empty line of `lines` (trimmed to 500 characters): in timestamp order, and when the
 * final burst (lines within {@link BURST_NS} of the last) holds stderr lines, the last of those (an
 * app's dying words go to stderr, and a pipe read late must not put a stdout line after them).
 */
export function lastWords(lines: readonly OutputLine[]): string {
  const shown = lines.filter((line) => line.text.trim() !== '');
  if (shown.length === 0) return '';
  // A stable sort by timestamp: the engine may log a pipe's read after the other's later one.
  const ordered = shown.map((line, index) => ({ line, index })).sort((a, b) => (a.line.atNs < b.line.atNs ? -1 : a.line.atNs > b.line.atNs ? 1 : a.index - b.index));
  const last = ordered[ordered.length - 1]?.line;
  if (last === undefined) return '';
  let chosen = last;
  for (let i = ordered.length - 1; i >= 0; i -= 1) {
    const entry = ordered[i]?.line;
    if (entry === undefined || last.atNs - entry.atNs > BURST_NS) break;
    if (entry.stream === 'stderr') {
      chosen = entry;
      break;
    }
  }
  return chosen.text.trim().slice(0, 500);
}
