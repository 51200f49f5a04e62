// Tests for build logs on disk: a log over its cap keeps its head and tail around a marker; followers see it whole.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { BuildLogStore } from '../../src/deploy/build-logs.js';

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function store(maxBytes: number): { logs: BuildLogStore; file: (build: string) => string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-logs-'));
  dirs.push(dir);
  const logs = new BuildLogStore(dir, maxBytes);
  return { logs, file: (build) => logs.file('dep', build) };
}

async function readAll(chunks: AsyncIterable<Buffer>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts).toString('utf8');
}

describe('build logs', () => {
  test('a log under its cap is kept whole, without a marker', async () => {
    const { logs, file } = store(8192);
    const text = Array.from({ length: 100 }, (_, i) => `line ${i}\n`).join('');
    for (const line of text.split(/(?<=\n)/)) logs.append('dep', 'b1', line);
    await logs.close('b1');
    assert.equal(fs.readFileSync(file('b1'), 'utf8'), text);
  });

  test('a log over its cap keeps its first and last lines, cut at line ends, with a marker counting what was cut', async () => {
    const cap = 8192;
    const { logs, file } = store(cap);
    const lines = Array.from({ length: 20_000 }, (_, i) => `output line ${i} ${'x'.repeat(i % 40)}\n`);
    for (const line of lines) logs.append('dep', 'b2', line);
    // One chunk far larger than the cap, as an engine may deliver.
    logs.append('dep', 'b2', lines.slice(0, 5000).join(''));
    logs.append('dep', 'b2', 'the very last line\n');
    await logs.close('b2');

    const total = Buffer.byteLength(lines.join('')) + Buffer.byteLength(lines.slice(0, 5000).join('')) + Buffer.byteLength('the very last line\n');
    const kept = fs.readFileSync(file('b2'));
    assert.ok(kept.length <= cap, `${kept.length} bytes on disk for a cap of ${cap}`);
    const text = kept.toString('utf8');
    const marker = /^… (\d+) bytes of build output omitted …$/m.exec(text);
    assert.ok(marker, 'the marker line is there');
    const [head, tail] = text.split(marker[0]) as [string, string];
    assert.ok(head.startsWith('output line 0 \noutput line 1 x\n'), 'the head starts with the first line');
    assert.ok(head.endsWith('\n') && tail.startsWith('\n'), 'cut at line ends');
    assert.ok(tail.endsWith('output line 4999 ' + 'x'.repeat(4999 % 40) + '\nthe very last line\n'), 'the tail ends with the last lines');
    // Nothing lost but what the marker counts.
    assert.equal(Buffer.byteLength(head) + Number(marker[1]) + Buffer.byteLength(tail) - 1, total);
  });

  test('a follower sees the head while the build runs, then the marker and the tail once the log is closed', async () => {
    const { logs } = store(4096);
    logs.append('dep', 'b3', 'first line\n');
    let finished = false;
    const followed = readAll(logs.read('dep', 'b3', { isFinished: async () => finished, pollMs: 10 }));
    for (let i = 0; i < 2000; i++) logs.append('dep', 'b3', `line ${i}\n`);
    logs.append('dep', 'b3', 'last line\n');
    // The build is recorded as finished before its log is closed: the follower must still wait for the tail.
    finished = true;
    await new Promise((resolve) => setTimeout(resolve, 50));
    await logs.close('b3');
    const text = await followed;
    assert.equal(text, await readAll(logs.read('dep', 'b3')));
    assert.match(text, /^first line\n/);
    assert.match(text, /bytes of build output omitted/);
    assert.match(text, /line 1999\nlast line\n$/);
  });
});
