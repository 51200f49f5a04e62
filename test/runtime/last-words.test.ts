// Unit tests of the crash report's last line: stamped log frames parsed, lines ordered by time, stderr preferred within the final burst.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lastWords } from '../../src/runtime/last-words.js';
import { parseStampNs, parseStampedLogs } from '../../src/runtime/docker/stamped-logs.js';
import type { OutputLine } from '../../src/runtime/engine.js';

const frame = (stream: 1 | 2, payload: string): Buffer => {
  const body = Buffer.from(payload);
  const head = Buffer.alloc(8);
  head[0] = stream;
  head.writeUInt32BE(body.length, 4);
  return Buffer.concat([head, body]);
};

test('stamped frames become lines with their stream and nanosecond time', () => {
  const buffer = Buffer.concat([
    frame(2, '2026-11-27T14:42:34.524144334Z err 1\n'),
    frame(1, '2026-11-27T14:42:34.5242Z out 1\n'),
    frame(1, 'not stamped\n'),
    frame(2, '2026-11-27T14:42:35Z last\r\n'),
  ]);
  assert.deepEqual(parseStampedLogs(buffer), [
    { stream: 'stderr', atNs: parseStampNs('2026-11-27T14:42:34.524144334Z'), text: 'err 1' },
    { stream: 'stdout', atNs: parseStampNs('2026-11-27T14:42:34.524200000Z'), text: 'out 1' },
    { stream: 'stderr', atNs: parseStampNs('2026-11-27T14:42:35.000000000Z'), text: 'last' },
  ]);
  assert.equal(parseStampNs('2026-11-27T14:42:34.5Z'), BigInt(Date.parse('2026-11-27T14:42:34Z')) * 1_000_000n + 500_000_000n);
  assert.equal(parseStampNs('yesterday'), null);
});

test('lastWords: stderr wins within the final burst, a later stdout line wins outside it, time order beats log order', () => {
  const at = (us: number): bigint => BigInt(us) * 1000n;
  const line = (stream: OutputLine['stream'], us: number, text: string): OutputLine => ({ stream, atNs: at(us), text });
  // The audit's case: stderr's block read before stdout's, all within a millisecond.
  assert.equal(lastWords([line('stderr', 1_000_000, 'err 1'), line('stderr', 1_000_070, 'fatal'), line('stdout', 1_000_130, 'out 5')]), 'fatal');
  // A stdout line a second after the stderr ones is the last line.
  assert.equal(lastWords([line('stderr', 1_000_000, 'warning'), line('stdout', 2_000_000, 'bye')]), 'bye');
  // Logged out of time order: time decides.
  assert.equal(lastWords([line('stdout', 3_000_000, 'late'), line('stdout', 1_000_000, 'early')]), 'late');
  assert.equal(lastWords([line('stdout', 1_000_000, '   '), line('stdout', 900_000, 'words')]), 'words');
  assert.equal(lastWords([]), '');
});
