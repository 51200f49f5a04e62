// A second `node --test` reporter (beside TAP on stdout): at the end of a run, the slowest test files and every failure with its file, on stderr, so the tail of a CI log says what failed and where the time went.
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const SLOWEST = 40;
const MAX_FAILURES = 30;

const short = (file) => (file ? path.relative(path.join(root, 'dist'), file) : '(unknown file)');

function firstLine(error) {
  const cause = error?.cause ?? error;
  const text = cause instanceof Error ? cause.message : String(cause ?? '');
  return text.split('\n').map((line) => line.trim()).filter((line) => line !== '').slice(0, 3).join(' ').slice(0, 300);
}

export default async function* summary(source) {
  const seconds = new Map();
  const failures = [];
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { file, name, nesting, details } = event.data;
    if (nesting === 0) seconds.set(short(file), (seconds.get(short(file)) ?? 0) + (details?.duration_ms ?? 0) / 1000);
    // A suite fails when one of its tests does: the innermost failure names the cause.
    if (event.type === 'test:fail' && details?.error?.failureType !== 'subtestsFailed') {
      failures.push(`  ${short(file)} › ${name}: ${firstLine(details?.error)}`);
    }
  }
  const slowest = [...seconds].sort((a, b) => b[1] - a[1]).slice(0, SLOWEST);
  yield `\n[tests] slowest files (seconds, top-level tests summed):\n${slowest.map(([file, s]) => `  ${s.toFixed(0).padStart(5)}  ${file}`).join('\n')}\n`;
  if (failures.length > 0) {
    const shown = failures.slice(0, MAX_FAILURES);
    yield `[tests] ${failures.length} failed:\n${shown.join('\n')}${failures.length > shown.length ? `\n  … and ${failures.length - shown.length} more (see the TAP output above)` : ''}\n`;
  }
}
