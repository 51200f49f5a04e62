// Unit tests of the .env parser behind `slipway env import`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DotenvError, parseDotenv } from '../../src/cli/dotenv.js';

describe('dotenv parser', () => {
  test('reads keys, values, quotes, escapes, comments and export prefixes', () => {
    const text = [
      '# a comment',
      '',
      'PLAIN=value',
      'SPACED = padded value  ',
      'export EXPORTED=yes',
      'INLINE=abc # trailing comment',
      'HASH_IN=abc#def',
      "SINGLE='literal $HOME \\n # not a comment'",
      'DOUBLE="line1\\nline2\\t\\"q\\" \\\\ \\$x \\z" # comment',
      'BACKTICK=`it\'s "both"`',
      'EMPTY=',
      'EMPTY_QUOTED=""',
      'MULTI="first',
      'second"',
      '  INDENTED=1',
      'URL=postgres://u:p@h:5432/db?sslmode=require',
      'DUP=1',
      'DUP=2',
      'CRLF=x\r',
      'EQUALS=a=b=c',
      'UNICODE="ünï ✓"',
    ].join('\n');
    assert.deepEqual(Object.fromEntries(parseDotenv(text)), {
      PLAIN: 'value',
      SPACED: 'padded value',
      EXPORTED: 'yes',
      INLINE: 'abc',
      HASH_IN: 'abc#def',
      SINGLE: 'literal $HOME \\n # not a comment',
      DOUBLE: 'line1\nline2\t"q" \\ $x \\z',
      BACKTICK: 'it\'s "both"',
      EMPTY: '',
      EMPTY_QUOTED: '',
      MULTI: 'first\nsecond',
      INDENTED: '1',
      URL: 'postgres://u:p@h:5432/db?sslmode=require',
      DUP: '2',
      CRLF: 'x',
      EQUALS: 'a=b=c',
      UNICODE: 'ünï ✓',
    });
  });

  test('bad lines are errors naming the line number, never the value', () => {
    const cases: Array<[string, RegExp]> = [
      ['OK=1\nno equals here\n', /^line 2: expected "=" after no/],
      ['OK=1\n=value\n', /^line 2: expected KEY=VALUE/],
      ['A="never closed secret-value\nB=2\n', /^line 1: the " quote of A is never closed/],
      ["A='x' trailing-secret\n", /^line 1: unexpected text after the closing quote of A/],
      ['1ABC=x', /^line 1: expected KEY=VALUE/],
    ];
    for (const [text, pattern] of cases) {
      assert.throws(() => parseDotenv(text), (err: unknown) => err instanceof DotenvError && pattern.test(err.message) && !err.message.includes('secret'), text);
    }
  });

  test('an empty file or one with only comments has no entries', () => {
    assert.equal(parseDotenv('').size, 0);
    assert.equal(parseDotenv('# only\n\n   # comments\n').size, 0);
  });
});
