// The parts of a server: started in order, stopped in reverse, each stop bounded and its failure logged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Parts } from '../../src/core/parts.js';

test('parts start in the order added and stop in reverse; add hands back what a part offers', async () => {
  const events: string[] = [];
  const parts = new Parts(() => undefined);
  const offered = parts.add('a', { offers: 42, start: () => void events.push('start a'), stop: () => void events.push('stop a') });
  parts.add('b', { offers: undefined, stop: async () => void events.push('stop b') });
  parts.add('c', { offers: undefined, start: async () => void events.push('start c'), stop: () => void events.push('stop c') });
  assert.equal(offered, 42);
  await parts.start();
  await Promise.all([parts.stop(), parts.stop()]);
  assert.deepEqual(events, ['start a', 'start c', 'stop c', 'stop b', 'stop a']);
  await parts.stop();
  assert.equal(events.length, 5, 'stop runs once');
});

test('a failing stop is logged and the others still stop; a hung stop is given up after the bound', async () => {
  const logged: string[] = [];
  const stopped: string[] = [];
  const parts = new Parts((level, msg) => logged.push(`${level}: ${msg}`), { stopTimeoutMs: 50 });
  parts.add('database', { offers: undefined, stop: () => void stopped.push('database') });
  parts.add('hung', { offers: undefined, stop: () => new Promise<void>(() => undefined) });
  parts.add('broken', {
    offers: undefined,
    stop: () => {
      throw new Error('boom');
    },
  });
  await parts.stop();
  assert.deepEqual(stopped, ['database']);
  assert.deepEqual(logged, ['error: stopping broken failed', 'warn: stopping hung took over 50 ms; the next part stops anyway']);
});

test('a start that fails leaves every part added to be stopped, the failed one and those never started too', async () => {
  const stopped: string[] = [];
  const parts = new Parts(() => undefined);
  parts.add('first', { offers: undefined, stop: () => void stopped.push('first') });
  parts.add('failing', {
    offers: undefined,
    start: () => Promise.reject(new Error('port taken')),
    stop: () => void stopped.push('failing'),
  });
  parts.add('never started', { offers: undefined, start: () => assert.fail('started after a failure'), stop: () => void stopped.push('never started') });
  await assert.rejects(parts.start(), /port taken/);
  await parts.stop();
  assert.deepEqual(stopped, ['never started', 'failing', 'first']);
  assert.throws(() => parts.add('late', { offers: undefined }), /after the parts stopped/);
});
