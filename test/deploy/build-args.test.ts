// Unit tests: which ARGs a Dockerfile declares, and which variables become build arguments (never secrets).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildArgsFor, declaredArgs } from '../../src/deploy/build-args.js';
import { releaseEnv } from '../../src/runtime/release.js';

describe('Dockerfile ARG names', () => {
  test('every ARG in every stage, several per line, defaults (quoted too), any case, continuations, comments', () => {
    const dockerfile = [
      'ARG BASE_TAG=latest',
      'FROM busybox:${BASE_TAG} AS build',
      'arg lower_case',
      'ARG ONE TWO=2 THREE="three with spaces" FOUR=\'4 4\'',
      'ARG CONTINUED_A \\',
      '  # a comment inside the continuation',
      '  CONTINUED_B=b',
      '# ARG COMMENTED_OUT',
      'RUN echo "ARG NOT_AN_ARG=1"',
      'ENV ALSO_NOT=1',
      'FROM scratch',
      '   ARG   INDENTED   ',
      'ARG WITH_CRLF\r',
    ].join('\n');
    assert.deepEqual(
      [...declaredArgs(dockerfile)].sort(),
      ['BASE_TAG', 'CONTINUED_A', 'CONTINUED_B', 'FOUR', 'INDENTED', 'ONE', 'THREE', 'TWO', 'WITH_CRLF', 'lower_case'],
    );
  });

  test('the escape directive changes the continuation character', () => {
    const dockerfile = ['# escape=`', 'FROM scratch', 'ARG A `', '  B', 'RUN dir c:\\', 'ARG C'].join('\n');
    assert.deepEqual([...declaredArgs(dockerfile)].sort(), ['A', 'B', 'C']);
  });

  test('no ARG, no names', () => {
    assert.equal(declaredArgs('FROM scratch\nCOPY . /\n').size, 0);
    assert.equal(declaredArgs('').size, 0);
  });
});

describe('build arguments of a build', () => {
  const at = '2026-11-22T00:00:00.000Z';
  test('only non-secret variables, only for declared ARGs', () => {
    const vars = [
      { key: 'DECLARED', value: 'yes', secret: false, updated_at: at },
      { key: 'UNDECLARED', value: 'no', secret: false, updated_at: at },
      { key: 'SECRET_DECLARED', value: 'never', secret: true, updated_at: at },
      { key: 'EMPTY', value: '', secret: false, updated_at: at },
    ];
    const dockerfile = 'FROM scratch\nARG DECLARED SECRET_DECLARED EMPTY\n';
    assert.deepEqual(buildArgsFor(dockerfile, vars), { DECLARED: 'yes', EMPTY: '' });
  });

  test('names like Object.prototype members stay ordinary names', () => {
    const vars = [
      { key: 'constructor', value: 'c', secret: false, updated_at: at },
      { key: 'toString', value: 't', secret: false, updated_at: at },
    ];
    const args = buildArgsFor('FROM scratch\nARG constructor toString\n', vars);
    assert.deepEqual(Object.entries(args), [['constructor', 'c'], ['toString', 't']]);
  });
});

describe('a release environment', () => {
  test('every variable, then PORT, as own properties', () => {
    const at = '2026-11-22T00:00:00.000Z';
    const env = releaseEnv(
      [
        { key: 'A', value: '1', secret: false, updated_at: at },
        { key: 'TOKEN', value: 's', secret: true, updated_at: at },
        { key: 'constructor', value: 'c', secret: false, updated_at: at },
      ],
      3000,
    );
    assert.deepEqual(Object.entries(env), [['A', '1'], ['TOKEN', 's'], ['constructor', 'c'], ['PORT', '3000']]);
  });
});
