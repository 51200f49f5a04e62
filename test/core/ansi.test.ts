// Unit tests: terminal escape sequences removed from build output, a sequence split between chunks included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AnsiStripper, stripAnsi } from '../../src/core/ansi.js';

test('colours, cursor moves and titles go; the text stays', () => {
  assert.equal(stripAnsi('\u001b[91mnpm ERR!\u001b[0m fetch failed\n'), 'npm ERR! fetch failed\n');
  assert.equal(stripAnsi('\u001b[1;31mred\u001b[0m \u001b[2K\u001b[1Gdone'), 'red done');
  assert.equal(stripAnsi('\u001b]0;title\u0007text'), 'text');
  assert.equal(stripAnsi('50% [=====>    ]'), '50% [=====>    ]');
});

test('a sequence cut between two chunks is held until its end arrives', () => {
  const strip = new AnsiStripper();
  assert.equal(strip.push('before \u001b[9'), 'before ');
  assert.equal(strip.push('1mred\u001b'), 'red');
  assert.equal(strip.push('[0m after\n'), ' after\n');
});

test('a lone escape character that never becomes a sequence does not hold the text back for ever', () => {
  const strip = new AnsiStripper();
  assert.equal(strip.push('a\u001b'), 'a');
  assert.equal(strip.push(`b${'x'.repeat(300)}`), `b${'x'.repeat(300)}`);
});
