// Tests for git as a build source: URL/branch validation, host checks, and resolve/fetch against a real local git server.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DomainError } from '../../src/core/errors.js';
import { assertRepoHostAllowed, fetchCommit, redactCredentials, resolveCommit } from '../../src/source/git.js';
import type { GitOptions } from '../../src/source/git.js';
import { pinnedSshArgs } from '../../src/source/git-ssh.js';
import { validateBranchName, validateRepoUrl } from '../../src/source/git-url.js';
import { startGitServer, TEST_PATH } from '../helpers/git-server.js';
import type { GitServer } from '../helpers/git-server.js';

const isValidationError = (err: unknown): boolean => err instanceof DomainError && err.code === 'validation_error';

/** A path in the temp dir that an injected command would create; each test checks it never appears. */
const sentinel = (): string => path.join(os.tmpdir(), `slipway-pwned-${randomUUID()}`);

async function tempDir(): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), 'slipway-git-test-'));
}

describe('validateRepoUrl', () => {
  test('accepts https, http, ssh and scp-like URLs', () => {
    for (const url of [
      'https://github.com/slipway/app.git',
      'https://gitlab.example.com:8443/group/sub/app',
      'http://127.0.0.1:8080/app.git',
      'git://git.example.com/app.git',
      'git://127.0.0.1:9418/app.git',
      'ssh://git@github.com/slipway/app.git',
      'ssh://git@[2001:db8::1]:2222/app.git',
      'git@github.com:slipway/app.git',
      'deploy_user@git.example.com:/srv/git/app.git',
    ]) {
      assert.equal(validateRepoUrl(url), null, url);
    }
  });

  test('refuses option-like values, transports, shell tricks and credentials', () => {
    const bad = [
      '',
      '--upload-pack=touch /tmp/x',
      '--upload-pack=touch',
      '-oProxyCommand=touch /tmp/x',
      '-u',
      'ext::sh -c touch% /tmp/pwned',
      'ext::sh',
      'fd::3',
      'file:///etc',
      'file:///tmp/repo.git',
      '/srv/git/app.git',
      '../app.git',
      '$(touch /tmp/x)',
      '`touch /tmp/x`',
      'https://h/x;rm -rf /',
      'https://h/x;rm',
      'https://h$(touch /tmp/x)/x',
      'https://h|id/x',
      'https://h/x\nhttps://evil/',
      'https://h/x\r',
      'https://h/x\t',
      'https://h/\u0000x',
      'https://gіthub.com/a/b', // Cyrillic і
      'git@host:-oProxyCommand',
      'git@host:--upload-pack=touch',
      '-git@host:x',
      'git@-oProxyCommand=x:y',
      'ssh://-oProxyCommand=touch/x',
      'ssh://git@-oProxyCommand=x/y',
      'https://user:secret@github.com/a/b',
      'https://token@github.com/a/b',
      'ssh://git:secret@github.com/a/b',
      'git://user@github.com/a/b',
      'ftp://example.com/a',
      'javascript:alert(1)',
      'https:///path',
      'https://',
      'https://github.com',
      'host:path',
      'https://%31%32%37.0.0.1/app.git',
      'ssh://git@exa%6dple.com/app.git',
      'https://exa_mple.com!/app.git',
      `https://example.com/${'a'.repeat(2100)}`,
    ];
    for (const url of bad) {
      const message = validateRepoUrl(url);
      assert.equal(typeof message, 'string', JSON.stringify(url));
    }
  });

  test('file:// only when allowed, and never a transport helper even then', () => {
    assert.equal(validateRepoUrl('file:///srv/git/app.git', { allowFile: true }), null);
    assert.notEqual(validateRepoUrl('ext::sh -c touch% /tmp/pwned', { allowFile: true }), null);
    assert.notEqual(validateRepoUrl('--upload-pack=x', { allowFile: true }), null);
  });
});

describe('validateBranchName', () => {
  test('accepts ordinary branch names', () => {
    for (const name of ['main', 'master', 'feature/login', 'release-1.2.3', 'user@fix', 'v2_beta', 'fix#12', 'dépôt']) {
      assert.equal(validateBranchName(name), null, name);
    }
  });

  test('refuses what git check-ref-format refuses, option-like names and shell tricks', () => {
    for (const name of [
      '',
      '--upload-pack=x',
      '--upload-pack=touch /tmp/x',
      '-x',
      'a..b',
      'a b',
      'foo.lock',
      'a/foo.lock/b',
      '$(x)',
      '`x`',
      'a;b',
      'a|b',
      'a&b',
      'a>b',
      'a\nb',
      'a\rb',
      'a\u0000b',
      'a\u007fb',
      'a~1',
      'a^b',
      'a:b',
      'a?b',
      'a*b',
      'a[b',
      'a\\b',
      'a@{1}',
      '@',
      'HEAD',
      '/a',
      'a/',
      'a//b',
      'a.',
      '.hidden',
      'a/.b',
      'x'.repeat(256),
    ]) {
      assert.equal(typeof validateBranchName(name), 'string', JSON.stringify(name));
    }
  });
});

describe('assertRepoHostAllowed', () => {
  const privateUrls = [
    'http://127.0.0.1/app.git',
    'http://127.1.2.3:8080/app.git',
    'http://localhost/app.git',
    'https://10.1.2.3/app.git',
    'https://172.16.5.4/app.git',
    'https://192.168.1.10/app.git',
    'http://169.254.169.254/latest/meta-data',
    'https://100.64.0.1/app.git',
    'http://0.0.0.0/app.git',
    'http://2130706433/app.git', // 127.0.0.1 as one decimal number
    'http://224.0.0.1/app.git',
    'http://[::1]/app.git',
    'http://[::]/app.git',
    'http://[::ffff:127.0.0.1]/app.git',
    'http://[::ffff:a9fe:a9fe]/app.git', // 169.254.169.254, IPv4-mapped in hex
    'http://[64:ff9b::a00:1]/app.git', // 10.0.0.1 through NAT64
    'http://[fd12:3456::1]/app.git',
    'http://[fe80::1]/app.git',
    'http://[ff02::1]/app.git',
    'ssh://git@10.0.0.1/app.git',
    'git@127.0.0.1:team/app.git',
    'git@localhost:team/app.git',
    'file:///etc',
  ];

  test('refuses loopback, private, link-local, CGNAT, multicast and file:// by default', async () => {
    for (const url of privateUrls) {
      await assert.rejects(assertRepoHostAllowed(url, false), isValidationError, url);
    }
  });

  test('allows them when private git is allowed', async () => {
    for (const url of privateUrls) {
      await assertRepoHostAllowed(url, true);
    }
  });

  test('allows public addresses', async () => {
    await assertRepoHostAllowed('https://93.184.216.34/app.git', false);
    await assertRepoHostAllowed('http://[2606:4700:4700::1111]/app.git', false);
    await assertRepoHostAllowed('git@8.8.8.8:team/app.git', false);
  });

  test('refuses an invalid URL before any lookup', async () => {
    await assert.rejects(assertRepoHostAllowed('--upload-pack=touch /tmp/x', true), isValidationError);
    await assert.rejects(assertRepoHostAllowed('ext::sh -c touch% /tmp/x', true), isValidationError);
  });
});

describe('git against a local smart-HTTP server', () => {
  let server: GitServer;
  let options: GitOptions;

  before(async () => {
    server = await startGitServer();
    options = { allowPrivate: true, timeoutMs: 20_000, gitEnv: server.gitEnv };
  });
  after(async () => {
    await server.close();
  });

  test('resolveCommit returns the head of a branch and of the default branch', async () => {
    const repo = await server.createRepo('resolve', { 'README.md': 'hello' });
    const featureSha = await server.commit('resolve', { 'feature.txt': 'x' }, { branch: 'feature/x' });
    assert.match(repo.sha, /^[0-9a-f]{40}$/);
    assert.notEqual(featureSha, repo.sha);

    assert.deepEqual(await resolveCommit(repo.url, 'main', options), { sha: repo.sha, branch: 'main' });
    assert.deepEqual(await resolveCommit(repo.url, 'feature/x', options), { sha: featureSha, branch: 'feature/x' });
    assert.deepEqual(await resolveCommit(repo.url, undefined, options), { sha: repo.sha, branch: 'main' });
  });

  test('resolveCommit reports a default branch that is not main', async () => {
    const repo = await server.createRepo('trunk-repo', { 'a.txt': 'a' }, { branch: 'trunk' });
    assert.deepEqual(await resolveCommit(repo.url, undefined, options), { sha: repo.sha, branch: 'trunk' });
  });

  test('resolveCommit matches the branch name exactly, not as a suffix', async () => {
    const repo = await server.createRepo('suffix', { 'a.txt': 'a' });
    await server.commit('suffix', { 'b.txt': 'b' }, { branch: 'team/main-x' });
    await server.commit('suffix', { 'c.txt': 'c' }, { branch: 'team/dev' });
    await assert.rejects(resolveCommit(repo.url, 'dev', options), isValidationError);
    assert.equal((await resolveCommit(repo.url, 'main', options)).sha, repo.sha);
  });

  test('resolveCommit: unknown branch is a validation_error', async () => {
    const repo = await server.createRepo('unknown-branch', { 'a.txt': 'a' });
    await assert.rejects(resolveCommit(repo.url, 'does-not-exist', options), (err: unknown) => {
      assert.ok(isValidationError(err));
      assert.match((err as Error).message, /does-not-exist/);
      return true;
    });
  });

  test('resolveCommit: a missing repo or closed port is a plain, readable Error', async () => {
    await assert.rejects(resolveCommit(`${server.url}/nope.git`, 'main', options), (err: unknown) => {
      assert.ok(err instanceof Error && !(err instanceof DomainError));
      assert.match(err.message, /git ls-remote failed/);
      return true;
    });
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await assert.rejects(resolveCommit(`http://127.0.0.1:${port}/app.git`, 'main', options), (err: unknown) => {
      assert.ok(err instanceof Error && !(err instanceof DomainError));
      assert.match(err.message, /git ls-remote failed: .*(connect|refused)/i);
      return true;
    });
  });

  test('resolveCommit and fetchCommit refuse the local server unless private hosts are allowed', async () => {
    const repo = await server.createRepo('private', { 'a.txt': 'a' });
    const strict = { ...options, allowPrivate: false };
    await assert.rejects(resolveCommit(repo.url, 'main', strict), isValidationError);
    const dest = await tempDir();
    try {
      await assert.rejects(fetchCommit(repo.url, repo.sha, path.join(dest, 'src'), strict), isValidationError);
      assert.equal(existsSync(path.join(dest, 'src')), false);
    } finally {
      await rm(dest, { recursive: true, force: true });
    }
  });

  test('fetchCommit checks out exactly the requested commit, even after the branch moved on', async () => {
    const repo = await server.createRepo('fetch', { 'app.txt': 'version 1', 'dir/nested.txt': 'nested' });
    const second = await server.commit('fetch', { 'app.txt': 'version 2' });
    const dest = await tempDir();
    try {
      const first = path.join(dest, 'first');
      let output = '';
      await fetchCommit(repo.url, repo.sha, first, { ...options, onOutput: (text) => (output += text) });
      assert.equal(await readFile(path.join(first, 'app.txt'), 'utf8'), 'version 1');
      assert.equal(await readFile(path.join(first, 'dir/nested.txt'), 'utf8'), 'nested');
      assert.ok(output.length > 0, 'progress was streamed');

      const latest = path.join(dest, 'latest');
      await fetchCommit(repo.url, second, latest, options);
      assert.equal(await readFile(path.join(latest, 'app.txt'), 'utf8'), 'version 2');
    } finally {
      await rm(dest, { recursive: true, force: true });
    }
  });

  test('fetchCommit refuses a non-empty destination and an unknown commit', async () => {
    const repo = await server.createRepo('fetch-errors', { 'a.txt': 'a' });
    const dest = await tempDir();
    try {
      await writeFile(path.join(dest, 'existing'), 'x');
      await assert.rejects(fetchCommit(repo.url, repo.sha, dest, options), /not empty/);
      const missing = 'f'.repeat(40);
      await assert.rejects(fetchCommit(repo.url, missing, path.join(dest, 'missing'), options), (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.match(err.message, /git fetch failed|not among/);
        return true;
      });
    } finally {
      await rm(dest, { recursive: true, force: true });
    }
  });

  test('injection payloads as URL, branch or sha are refused and never run anything', async () => {
    const repo = await server.createRepo('inject', { 'a.txt': 'a' });
    const dest = await tempDir();
    const marker = sentinel();
    try {
      const urlPayloads = [
        `--upload-pack=touch ${marker}`,
        `--upload-pack=touch${marker}`,
        `-u touch ${marker}`,
        `ext::sh -c touch% ${marker}`,
        `ext::touch ${marker}`,
        `$(touch ${marker})`,
        `\`touch ${marker}\``,
        `${repo.url};touch ${marker}`,
        `${repo.url}\ntouch ${marker}`,
        `git@127.0.0.1:-oProxyCommand=touch${marker}`,
        `ssh://-oProxyCommand=touch${marker}/x`,
      ];
      // allowPrivate: true, the most permissive setting, so only validation stands in the way.
      for (const url of urlPayloads) {
        await assert.rejects(resolveCommit(url, 'main', options), isValidationError, url);
        await assert.rejects(resolveCommit(url, undefined, options), isValidationError, url);
        await assert.rejects(fetchCommit(url, repo.sha, path.join(dest, randomUUID()), options), isValidationError, url);
      }
      const branchPayloads = [
        `--upload-pack=touch ${marker}`,
        `--upload-pack=touch${marker}`,
        '-x',
        `$(touch ${marker})`,
        `\`touch ${marker}\``,
        `main;touch${marker}`,
        `main\ntouch${marker}`,
      ];
      for (const branch of branchPayloads) {
        await assert.rejects(resolveCommit(repo.url, branch, options), isValidationError, branch);
        await assert.rejects(fetchCommit(repo.url, repo.sha, path.join(dest, randomUUID()), { ...options, branch }), isValidationError, branch);
      }
      for (const sha of [`--upload-pack=touch ${marker}`, `${repo.sha};touch${marker}`, 'HEAD', repo.sha.toUpperCase()]) {
        await assert.rejects(fetchCommit(repo.url, sha, path.join(dest, randomUUID()), options), isValidationError, sha);
      }
      assert.equal(existsSync(marker), false, 'no payload ran');
    } finally {
      await rm(dest, { recursive: true, force: true });
      await rm(marker, { force: true });
    }
  });

  test('GIT_* variables in the base environment are not passed to git', async () => {
    const repo = await server.createRepo('env', { 'a.txt': 'a' });
    const marker = sentinel();
    const env = { ...server.gitEnv, GIT_TRACE: marker, GIT_SSH_COMMAND: `touch ${marker}` };
    try {
      assert.equal((await resolveCommit(repo.url, 'main', { ...options, gitEnv: env })).sha, repo.sha);
      assert.equal(existsSync(marker), false);
    } finally {
      await rm(marker, { force: true });
    }
  });
});

describe('git against a server that refuses fetching by sha (protocol v0)', () => {
  let server: GitServer;
  let options: GitOptions;

  before(async () => {
    server = await startGitServer({ protocolV2: false, allowShaInWant: false });
    options = { allowPrivate: true, timeoutMs: 20_000, gitEnv: server.gitEnv };
  });
  after(async () => {
    await server.close();
  });

  test('falls back to the branch and still checks out the older commit', async () => {
    const repo = await server.createRepo('fallback', { 'app.txt': 'version 1' });
    const resolved = await resolveCommit(repo.url, undefined, options);
    assert.deepEqual(resolved, { sha: repo.sha, branch: 'main' });
    await server.commit('fallback', { 'app.txt': 'version 2' });
    const dest = await tempDir();
    try {
      let output = '';
      await fetchCommit(repo.url, repo.sha, path.join(dest, 'src'), {
        ...options,
        branch: 'main',
        onOutput: (text) => (output += text),
      });
      assert.equal(await readFile(path.join(dest, 'src', 'app.txt'), 'utf8'), 'version 1');
      assert.match(output, /fetching branch "main" instead/);
    } finally {
      await rm(dest, { recursive: true, force: true });
    }
  });

  test('fails clearly when the commit is not on the branch', async () => {
    const repo = await server.createRepo('fallback-missing', { 'app.txt': 'v1' });
    // Not a branch tip, so a v0 server refuses it by sha; and it is not on main.
    const other = await server.commit('fallback-missing', { 'other.txt': 'x' }, { branch: 'other' });
    await server.commit('fallback-missing', { 'other.txt': 'y' }, { branch: 'other' });
    const dest = await tempDir();
    try {
      await assert.rejects(
        fetchCommit(repo.url, other, path.join(dest, 'src'), { ...options, branch: 'main' }),
        /is not among the last \d+ commits of branch "main"/,
      );
    } finally {
      await rm(dest, { recursive: true, force: true });
    }
  });
});

describe('time limits', () => {
  let silent: net.Server;
  let silentUrl: string;
  const sockets = new Set<net.Socket>();

  before(async () => {
    // Accepts connections and never answers.
    silent = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/app.git`;
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  const gitEnv = { PATH: TEST_PATH, HOME: os.tmpdir() };

  test('resolveCommit against a server that never answers rejects within the timeout', async () => {
    const started = Date.now();
    await assert.rejects(resolveCommit(silentUrl, 'main', { allowPrivate: true, timeoutMs: 1000, gitEnv }), /timed out after 1s/);
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started}ms`);
  });

  test('fetchCommit against a server that never answers rejects within the timeout', async () => {
    const dest = await tempDir();
    try {
      const started = Date.now();
      await assert.rejects(
        fetchCommit(silentUrl, 'a'.repeat(40), path.join(dest, 'src'), { allowPrivate: true, timeoutMs: 1000, gitEnv }),
        /timed out/,
      );
      assert.ok(Date.now() - started < 5000, `took ${Date.now() - started}ms`);
    } finally {
      await rm(dest, { recursive: true, force: true });
    }
  });

  test('an abort signal cancels a running git', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const started = Date.now();
    await assert.rejects(
      resolveCommit(silentUrl, 'main', { allowPrivate: true, timeoutMs: 30_000, gitEnv, signal: controller.signal }),
      (err: unknown) => err instanceof Error && err.name === 'AbortError',
    );
    assert.ok(Date.now() - started < 5000);
  });
});

describe('redactCredentials', () => {
  test('hides user:password and http(s) tokens', () => {
    assert.equal(
      redactCredentials("fatal: unable to access 'https://alice:s3cret@example.com/a.git/': 403"),
      "fatal: unable to access 'https://***@example.com/a.git/': 403",
    );
    assert.equal(redactCredentials('https://ghp_token123@github.com/a/b'), 'https://***@github.com/a/b');
    assert.equal(redactCredentials('ssh://git:pw@host/x'), 'ssh://***@host/x');
    assert.equal(redactCredentials('ssh://git@host/x'), 'ssh://git@host/x');
  });
});

describe('ssh sources are pinned to the checked address', () => {
  let dir: string;
  let record: string;
  let gitEnv: Record<string, string>;
  const REBOUND = '10.0.0.7';

  before(async () => {
    dir = await tempDir();
    record = path.join(dir, 'ssh-calls.jsonl');
    // A fake ssh first on PATH: it records the argv it was given and fails as an unreachable host would.
    const fake = path.join(dir, 'ssh');
    await writeFile(
      fake,
      `#!${process.execPath}\n` +
        `require('node:fs').appendFileSync(process.env.SLIPWAY_TEST_SSH_RECORD, JSON.stringify(process.argv.slice(2)) + '\\n');\n` +
        `process.stderr.write('ssh: connect to host: Connection refused\\n');\n` +
        `process.exit(255);\n`,
      { mode: 0o755 },
    );
    await writeFile(path.join(dir, 'package.json'), '{"type":"commonjs"}\n');
    gitEnv = { PATH: `${dir}:${TEST_PATH}`, HOME: dir, SLIPWAY_TEST_SSH_RECORD: record };
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** The argv of each ssh run since the last call. */
  async function sshCalls(): Promise<string[][]> {
    if (!existsSync(record)) return [];
    const text = await readFile(record, 'utf8');
    await rm(record);
    return text.trim().split('\n').map((line) => JSON.parse(line) as string[]);
  }

  /** A resolver that answers a public address once, then (as a rebinding DNS would) a private one. */
  function rebindingResolver(): { resolve: (host: string) => Promise<string[]>; calls: string[] } {
    const calls: string[] = [];
    return {
      calls,
      resolve: async (host) => {
        calls.push(host);
        return calls.length === 1 ? ['93.184.216.34'] : [REBOUND];
      },
    };
  }

  function assertPinned(argv: string[] | undefined, host: string, destination: string): void {
    assert.ok(argv !== undefined, 'ssh was run');
    const options: string[] = [];
    for (let i = 0; i < argv.indexOf('--'); i++) if (argv[i] === '-o') options.push(argv[i + 1] as string);
    assert.ok(options.includes('HostName=93.184.216.34'), `connects to the checked address: ${JSON.stringify(argv)}`);
    assert.ok(options.includes(`HostKeyAlias=${host}`), 'known_hosts still names the host');
    assert.ok(!argv.some((arg) => arg.includes(REBOUND)), 'never the address DNS gave later');
    const dashes = argv.indexOf('--');
    assert.ok(dashes > 0, 'options end with --');
    assert.equal(argv[dashes + 1], destination);
    assert.equal(argv.length, dashes + 3, 'after -- only the destination and the remote command');
  }

  test('resolveCommit over ssh:// connects to the address that passed the check, resolved once', async () => {
    const dns = rebindingResolver();
    const options: GitOptions = { allowPrivate: false, timeoutMs: 20_000, gitEnv, resolve: dns.resolve };
    await assert.rejects(resolveCommit('ssh://git@repo.example.test:2222/team/app.git', 'main', options), (err: unknown) => {
      assert.ok(!isValidationError(err), String(err));
      assert.match((err as Error).message, /Could not read from remote repository/);
      return true;
    });
    assert.deepEqual(dns.calls, ['repo.example.test']);
    const [argv, ...more] = await sshCalls();
    assert.equal(more.length, 0);
    assertPinned(argv, 'repo.example.test', 'git@repo.example.test');
    assert.ok(argv?.includes('2222'), 'the port is passed on');
  });

  test('fetchCommit over git@host:path connects to the checked address', async () => {
    const dns = rebindingResolver();
    const dest = path.join(await tempDir(), 'src');
    try {
      const options: GitOptions = { allowPrivate: false, timeoutMs: 20_000, gitEnv, resolve: dns.resolve };
      await assert.rejects(fetchCommit('git@repo.example.test:team/app.git', 'a'.repeat(40), dest, options), /Could not read from remote repository/);
      assert.deepEqual(dns.calls, ['repo.example.test']);
      const calls = await sshCalls();
      assert.ok(calls.length >= 1);
      for (const argv of calls) assertPinned(argv, 'repo.example.test', 'git@repo.example.test');
    } finally {
      await rm(path.dirname(dest), { recursive: true, force: true });
    }
  });

  test('a host resolving to a private address is refused before ssh runs', async () => {
    const options: GitOptions = { allowPrivate: false, timeoutMs: 20_000, gitEnv, resolve: async () => ['93.184.216.34', REBOUND] };
    await assert.rejects(resolveCommit('git@repo.example.test:team/app.git', 'main', options), isValidationError);
    await assert.rejects(resolveCommit('ssh://git@repo.example.test/team/app.git', 'main', { ...options, resolve: async () => ['fd00::1'] }), isValidationError);
    assert.deepEqual(await sshCalls(), []);
  });

  test('with private hosts allowed nothing is resolved or pinned, and the options still end with --', async () => {
    const options: GitOptions = {
      allowPrivate: true,
      timeoutMs: 20_000,
      gitEnv,
      resolve: async () => assert.fail('no lookup when private hosts are allowed'),
    };
    await assert.rejects(resolveCommit('git@repo.example.test:team/app.git', 'main', options), /Could not read from remote repository/);
    const [argv] = await sshCalls();
    assert.ok(argv !== undefined && !argv.some((arg) => arg.startsWith('HostName=')));
    assert.equal(argv[argv.indexOf('--') + 1], 'git@repo.example.test');
  });
});

describe('pinnedSshArgs', () => {
  test('refuses a destination that is not the repository host', () => {
    const env = { SLIPWAY_GIT_SSH_HOST: 'repo.example.test', SLIPWAY_GIT_SSH_ADDRESS: '93.184.216.34' };
    assert.throws(() => pinnedSshArgs(['git@other.example.test', "git-upload-pack 'x'"], env), /not the repository's host/);
    assert.throws(() => pinnedSshArgs(['-oProxyCommand=x', "git-upload-pack 'x'"], env), /not the repository's host/);
    assert.throws(() => pinnedSshArgs(['git@repo.example.test'], env), /host and a command/);
    assert.deepEqual(pinnedSshArgs(['-p', '22', 'git@repo.example.test', "git-upload-pack 'x'"], env).slice(-5), ['-p', '22', '--', 'git@repo.example.test', "git-upload-pack 'x'"]);
  });
});
