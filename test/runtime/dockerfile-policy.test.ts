// Unit tests of the Dockerfile fetch policy: what a Dockerfile makes the engine fetch, and what is refused.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { dockerfileFetches, dockerfileProblem, imageRepository, registryHost, type Resolve } from '../../src/runtime/dockerfile-policy.js';

/** A resolver over a fixed table (no DNS in unit tests); unknown names do not resolve. */
const table: Record<string, string[]> = {
  'registry.example.com': ['93.184.216.34'],
  'ghcr.io': ['140.82.112.33'],
  'internal.example.com': ['10.1.2.3'],
  'mixed.example.com': ['93.184.216.35', '192.168.1.10'],
  'v6local.example.com': ['fd00::1'],
  'metadata.example.com': ['169.254.169.254'],
  localhost: ['127.0.0.1', '::1'],
  'cgnat.example.com': ['100.64.0.9'],
  'mapped.example.com': ['::ffff:127.0.0.1'],
};
const resolve: Resolve = async (host) => {
  const found = table[host];
  if (found === undefined) throw new Error(`ENOTFOUND ${host}`);
  return found;
};
const problem = (text: string): Promise<string | null> => dockerfileProblem(text, resolve);

describe('dockerfile fetch policy', () => {
  test('build arguments replace ARG defaults before the check: a variable cannot point FROM or ADD at a private host', async () => {
    const text = 'ARG BASE=node:20\nFROM ${BASE}\nARG SRC=./local\nADD ${SRC} /x\n';
    assert.equal(await dockerfileProblem(text, resolve), null);
    assert.match((await dockerfileProblem(text, resolve, { BASE: 'internal.example.com/img' })) ?? '', /line 2: FROM internal\.example\.com\/img refused/);
    assert.match((await dockerfileProblem(text, resolve, { SRC: 'http://169.254.169.254/latest' })) ?? '', /line 4: ADD http:\/\/169\.254\.169\.254\/latest refused/);
    // An argument the Dockerfile does not declare changes nothing.
    assert.equal(await dockerfileProblem(text, resolve, { OTHER: 'internal.example.com/img' }), null);
  });

  test('ordinary Dockerfiles pass: public bases, stages, COPY --from a stage or index, local COPY/ADD', async () => {
    const ok = [
      'FROM node:20\nCOPY . /app\nRUN npm ci\n',
      'FROM slipway-test/busybox:latest\nCOPY index.html /www/\n',
      'FROM registry.example.com/team/app:1 AS build\nRUN make\nFROM scratch\nCOPY --from=build /out /\nCOPY --from=0 /x /y\n',
      'FROM ghcr.io/org/img@sha256:' + 'a'.repeat(64) + '\n',
      'FROM --platform=linux/amd64 node:20\nADD app.tar.gz /app/\nADD --chown=1:1 ["a b", "/c"]\n',
      'ARG BASE=node:20\nFROM ${BASE}\n',
      'FROM localhost:5000\n', // a docker.io image named "localhost", tag 5000
      '# comment\n\nfrom node\nadd ./local /x\n',
    ];
    for (const text of ok) assert.equal(await problem(text), null, text);
  });

  test('ADD of any URL is refused, whatever its form, case or quoting', async () => {
    const refused = [
      'FROM node\nADD http://127.0.0.1:8080/secret /s\n',
      'FROM node\nadd https://example.com/file.tgz /x\n',
      'FROM node\nADD --checksum=sha256:abc https://example.com/f /f\n',
      'FROM node\nADD ["http://127.0.0.1/x", "/x"]\n',
      'FROM node\nADD "http://127.0.0.1/x" /x\n',
      'FROM node\nADD git@github.com:org/repo.git /src\n',
      'FROM node\nADD https://github.com/org/repo.git#main /src\n',
      'FROM node\nADD local.txt \\\n    http://127.0.0.1/x \\\n    /dest/\n',
      'FROM node\nADD \\\n# a comment inside the continuation\n  http://127.0.0.1/x /x\n',
      '# escape=`\nFROM node\nADD `\n  http://127.0.0.1/x /x\n',
      'FROM node\nARG U=http://127.0.0.1:9/secret\nADD $U /x\n',
      'ARG H=127.0.0.1\nFROM node\nARG H\nADD http://${H}/x /x\n',
      'FROM node\nENV U http://10.0.0.1/x\nADD ${U} /x\n',
      'FROM node\nENV A=1 U=http://10.0.0.1/x\nADD ${U} /x\n',
      'FROM node AS base\nONBUILD ADD http://127.0.0.1/x /x\nFROM base\n',
      'FROM node\nonbuild add https://example.com/f /f\n',
    ];
    for (const text of refused) assert.match((await problem(text)) ?? 'passed', /ADD .* refused: ADD may not fetch URLs/, text);
  });

  test('ADD sources that depend on variables the Dockerfile does not define are refused', async () => {
    assert.match((await problem('FROM node\nADD $FROM_BASE_IMAGE /x\n')) ?? '', /variables not defined in the Dockerfile/);
    assert.match((await problem('FROM node\nADD ${X#y} /x\n')) ?? '', /variables not defined/);
    // COPY never fetches URLs: variables there are fine.
    assert.equal(await problem('FROM node\nCOPY $FROM_BASE_IMAGE /x\n'), null);
    // An escaped dollar is a literal.
    assert.equal(await problem('FROM node\nADD price\\$list.txt /x\n'), null);
  });

  test('image references on loopback, private, link-local, CGNAT or unresolvable registries are refused', async () => {
    const cases: [string, RegExp][] = [
      ['FROM 127.0.0.1:5000/x\n', /FROM 127\.0\.0\.1:5000\/x refused: .*loopback, private/],
      ['FROM localhost/x\n', /"localhost" is on a loopback/],
      ['FROM localhost:5000/x:1\n', /"localhost"/],
      ['FROM [::1]:5000/x\n', /"::1"/],
      ['FROM 10.0.0.8/x\n', /"10\.0\.0\.8"/],
      ['FROM internal.example.com/x\n', /10\.1\.2\.3/],
      ['FROM mixed.example.com/x\n', /192\.168\.1\.10/],
      ['FROM v6local.example.com/x\n', /fd00::1/],
      ['FROM metadata.example.com/x\n', /169\.254\.169\.254/],
      ['FROM cgnat.example.com/x\n', /100\.64\.0\.9/],
      ['FROM mapped.example.com/x\n', /::ffff:127\.0\.0\.1/],
      ['FROM nowhere.invalid/x\n', /"nowhere\.invalid" could not be resolved/],
      ['FROM --platform=linux/amd64 127.0.0.1:5000/x AS base\n', /127\.0\.0\.1/],
      ['ARG REG=127.0.0.1:5000\nFROM ${REG}/img\n', /FROM 127\.0\.0\.1:5000\/img refused/],
      ['ARG REG=127.0.0.1:5000\nFROM $REG/img\n', /refused/],
      ['ARG REG\nFROM ${REG:-127.0.0.1:5000}/img\n', /refused/],
      ['FROM node\nCOPY --from=127.0.0.1:5000/x /a /b\n', /COPY --from 127\.0\.0\.1:5000\/x refused/],
      ['FROM node AS a\nFROM a\nCOPY --from=localhost:5000/img:1 /a /b\n', /COPY --from localhost:5000/],
      ['FROM node\nCOPY --from=$X /a /b\n', /variables not defined/],
      ['fRoM 127.0.0.1:5000/x\n', /refused/],
      ['FROM \\\n  127.0.0.1:5000/x\n', /refused/],
      ['FROM Internal.Example.com/x\n', /could not be resolved|refused/],
    ];
    for (const [text, expected] of cases) assert.match((await problem(text)) ?? 'passed', expected, text);
  });

  test("another deployment's image, or a name the engine could match against image ids, is refused", async () => {
    assert.match((await problem('FROM slipway-0a1b2c3d/' + 'e'.repeat(8) + ':x\n')) ?? '', /built by Slipway/);
    assert.match((await problem('FROM node\nCOPY --from=slipway-0a1b2c3d/dep:build /app /app\n')) ?? '', /built by Slipway/);
    assert.match((await problem('FROM 3f2a\n')) ?? '', /by its id/);
    assert.match((await problem('FROM sha256:3f2a\n')) ?? '', /by its id/);
    assert.equal(await problem('FROM slipway-test/busybox:latest\n'), null);
  });

  test("the attack: another tenant's image named through a Docker Hub host, library/, a tag, a digest or other case is refused", async () => {
    const image = 'slipway-0a1b2c3d/dep0123:build0123';
    const digest = '@sha256:' + 'b'.repeat(64);
    const spellings = [
      `docker.io/${image}`,
      `index.docker.io/${image}`,
      `registry-1.docker.io/${image}`,
      `docker.io:443/${image}`,
      `DOCKER.IO/${image}`,
      `Docker.Io/SLIPWAY-0A1B2C3D/DEP0123:build0123`,
      `docker.io/library/${image}`,
      `library/${image}`,
      `index.docker.io/library/${image}`,
      'docker.io/slipway-0a1b2c3d/dep0123',
      `docker.io/slipway-0a1b2c3d/dep0123${digest}`,
      `docker.io/slipway-0a1b2c3d/dep0123:build0123${digest}`,
      `slipway-0a1b2c3d/dep0123${digest}`,
    ];
    for (const ref of spellings) {
      for (const text of [`FROM ${ref}\n`, `FROM node\nCOPY --from=${ref} /app /app\n`, `ARG B=${ref}\nFROM \${B}\n`]) {
        assert.match((await problem(text)) ?? 'passed', /built by Slipway/, text);
      }
    }
    // Hub images with the same spellings still pass the local check (they fail here only on DNS).
    assert.doesNotMatch((await problem('FROM docker.io/library/node:20\n')) ?? '', /built by Slipway|by its id/);
  });

  test('imageRepository normalises what the engine treats as one local name', () => {
    assert.equal(imageRepository('docker.io/library/node:20'), 'node');
    assert.equal(imageRepository('index.docker.io/library/node@sha256:' + 'a'.repeat(64)), 'node');
    assert.equal(imageRepository('registry-1.docker.io/org/img:1'), 'org/img');
    assert.equal(imageRepository('Docker.IO/Org/Img'), 'org/img');
    assert.equal(imageRepository('ghcr.io/org/img:1'), 'ghcr.io/org/img');
    assert.equal(imageRepository('localhost:5000/img:1'), 'localhost:5000/img');
    assert.equal(imageRepository('node'), 'node');
  });

  test('dockerfileFetches lists what the engine would fetch, with lines', () => {
    const text = 'ARG V=3\nFROM node:${V} AS b\nRUN x\nFROM b\nCOPY --from=ghcr.io/o/i:1 /a /b\nADD https://e.com/f /f\n';
    assert.deepEqual(dockerfileFetches(text), [
      { kind: 'image', ref: 'node:3', line: 2, instruction: 'FROM' },
      { kind: 'image', ref: 'ghcr.io/o/i:1', line: 5, instruction: 'COPY --from' },
      { kind: 'add', source: 'https://e.com/f', line: 6 },
    ]);
  });

  test('registryHost follows the engine: dots, colons, localhost or upper case make a registry', () => {
    assert.equal(registryHost('node'), null);
    assert.equal(registryHost('library/node:20'), null);
    assert.equal(registryHost('slipway-test/busybox:latest'), null);
    assert.equal(registryHost('ghcr.io/o/i'), 'ghcr.io');
    assert.equal(registryHost('localhost/x'), 'localhost');
    assert.equal(registryHost('host:5000/x'), 'host');
    assert.equal(registryHost('[fe80::1]:5000/x'), 'fe80::1');
    assert.equal(registryHost('Upper/x'), 'Upper');
  });
});
