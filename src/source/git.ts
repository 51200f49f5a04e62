// Git as a build source: resolve a branch to a commit and fetch exactly that commit, with git locked down.
import { spawn } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { mkdir, readdir } from 'node:fs/promises';
import net from 'node:net';
import { DomainError } from '../core/errors.js';
import { isPrivateAddress } from '../core/private-address.js';
import { gitSshProgram, SSH_ENV } from './git-ssh.js';
import { validateBranchName, validateRepoUrl } from './git-url.js';
import { shallowUnsupported, withoutDepthWhenRefused } from './shallow-fallback.js';

/** How git is run. */
export interface GitOptions {
  /** Allow file:// and hosts on loopback/private networks (SLIPWAY_ALLOW_PRIVATE_GIT). */
  allowPrivate: boolean;
  /** Time limit of each git process; it is killed (with its children) when exceeded. */
  timeoutMs: number;
  /** Cancels the running git process. */
  signal?: AbortSignal;
  /** Base environment of git children, e.g. `{ PATH, HOME }`; `GIT_*` entries are ignored. */
  gitEnv: Record<string, string>;
  /** Resolves a host for the private-address check (default: the system resolver); git is pinned to its answer. */
  resolve?: (host: string) => Promise<string[]>;
}

const systemResolve = async (host: string): Promise<string[]> =>
  (await lookup(host, { all: true, verbatim: true })).map((result) => result.address);

const SHA = /^[0-9a-f]{40}$/;
/** Most bytes read from a git process's stdout before it is killed. */
const MAX_STDOUT_BYTES = 1024 * 1024;
/** Bytes of stderr kept for error messages. */
const STDERR_TAIL_BYTES = 16 * 1024;
/** Depths tried, in turn, when a server refuses a fetch by sha and the branch has moved on. */
const FALLBACK_DEPTHS = [1, 50, 1000];

interface RepoTarget {
  scheme: 'https' | 'http' | 'git' | 'ssh' | 'file';
  /** Host as git will connect to it (brackets removed from IPv6 literals); empty for file://. */
  host: string;
  port: number;
}

function parseTarget(repoUrl: string): RepoTarget {
  const scp = /^[^@/:]+@([^@/:]+):/.exec(repoUrl);
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(repoUrl) && scp !== null) return { scheme: 'ssh', host: scp[1] ?? '', port: 22 };
  const url = new URL(repoUrl);
  const scheme = url.protocol.slice(0, -1).toLowerCase() as RepoTarget['scheme'];
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const defaultPort = scheme === 'https' ? 443 : scheme === 'http' ? 80 : scheme === 'git' ? 9418 : 22;
  return { scheme, host, port: url.port === '' ? defaultPort : Number(url.port) };
}

function validationError(message: string): DomainError {
  return new DomainError('validation_error', message);
}

/** What the operator can do about a refused private repository (decisions §1). */
const PRIVATE_GIT_HINT = ' (a server that should reach such repositories is started with SLIPWAY_ALLOW_PRIVATE_GIT=true)';

/**
 * Checks the URL's syntax and where it points; returns the addresses its host resolved to (empty when
 * allowPrivate skipped the lookup) so callers can pin git to them.
 */
async function checkRepo(
  repoUrl: string,
  allowPrivate: boolean,
  limits?: { timeoutMs: number; signal?: AbortSignal | undefined; resolve?: ((host: string) => Promise<string[]>) | undefined },
): Promise<{ target: RepoTarget; addresses: string[] }> {
  const problem = validateRepoUrl(repoUrl, { allowFile: allowPrivate });
  if (problem !== null) throw validationError(problem);
  const target = parseTarget(repoUrl);
  if (allowPrivate) return { target, addresses: [] };
  if (target.scheme === 'file') throw validationError(`repo_url must not be a file:// URL${PRIVATE_GIT_HINT}`);
  let results: string[];
  try {
    results = await withLimits((limits?.resolve ?? systemResolve)(target.host), `resolving "${target.host}"`, limits);
  } catch (err) {
    if (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError')) throw err;
    throw validationError(`repo_url host "${target.host}" could not be resolved`);
  }
  if (results.length === 0) throw validationError(`repo_url host "${target.host}" could not be resolved`);
  if (results.some((address) => isPrivateAddress(address))) {
    throw validationError(`repo_url host "${target.host}" is on a loopback, private or reserved network${PRIVATE_GIT_HINT}`);
  }
  return { target, addresses: results };
}

/** Settles like `promise`, but rejects early on timeout or abort (getaddrinfo itself cannot be cancelled). */
async function withLimits<T>(
  promise: Promise<T>,
  what: string,
  limits: { timeoutMs: number; signal?: AbortSignal | undefined } | undefined,
): Promise<T> {
  if (limits === undefined) return promise;
  const { timeoutMs, signal } = limits;
  if (signal?.aborted === true) throw abortError(what);
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const error = new Error(`${what} timed out after ${Math.round(timeoutMs / 1000)}s`);
          error.name = 'TimeoutError';
          reject(error);
        }, timeoutMs);
        onAbort = () => reject(abortError(what));
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * Refuses (DomainError `validation_error`) an invalid URL, file://, and a host that resolves to any
 * loopback, private, link-local, unique-local, CGNAT, unspecified, multicast or reserved address
 * (IPv4 and IPv6, IPv4-mapped included), unless `allowPrivate`. Every resolved address must be public.
 */
export async function assertRepoHostAllowed(
  repoUrl: string,
  allowPrivate: boolean,
  options: { allowUnresolvable?: boolean } = {},
): Promise<void> {
  try {
    await checkRepo(repoUrl, allowPrivate, { timeoutMs: 5_000 });
  } catch (err) {
    // At create time a host that does not resolve (yet, or from here) is not a reason to refuse:
    // the deploy resolves it again and refuses private addresses then.
    const unresolvable = err instanceof DomainError && err.message.endsWith('could not be resolved');
    const timedOut = err instanceof Error && err.name === 'TimeoutError';
    if (options.allowUnresolvable === true && (unresolvable || timedOut)) return;
    throw err;
  }
}

/** Hides credentials (`user:pass@`, or any userinfo of an http(s) URL) in text shown to people. */
export function redactCredentials(text: string): string {
  return text
    .replace(/\b(https?:\/\/)[^\s/@'"]+@/gi, '$1***@')
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@:'"]*:[^\s/@'"]*@/gi, '$1***@');
}

/**
 * The URL git is given: for git:// (which has no resolve option like curl's, nor an ssh wrapper) the
 * host is replaced by the address just checked, so DNS cannot answer differently for git (rebinding).
 */
function remoteFor(repoUrl: string, target: RepoTarget, addresses: string[]): string {
  const address = addresses[0];
  if (target.scheme !== 'git' || address === undefined) return repoUrl;
  const url = new URL(repoUrl);
  url.hostname = net.isIPv6(address) ? `[${address}]` : address;
  return url.href;
}

/** `-c` settings that lock git down for every call. */
function gitConfigArgs(options: GitOptions, target: RepoTarget, addresses: string[]): string[] {
  const settings = [
    'protocol.allow=never',
    'protocol.https.allow=always',
    'protocol.http.allow=always',
    'protocol.git.allow=always',
    'protocol.ssh.allow=always',
    `protocol.file.allow=${options.allowPrivate ? 'always' : 'never'}`,
    'protocol.ext.allow=never',
    'core.hooksPath=/dev/null',
    'core.fsmonitor=false',
    'submodule.recurse=false',
    'credential.helper=',
    'core.askPass=',
    // A redirect could lead to a private address after the host check; no redirects, no surprises.
    'http.followRedirects=false',
    'transfer.fsckObjects=true',
    'init.templateDir=',
    'advice.detachedHead=false',
    'gc.auto=0',
    'maintenance.auto=false',
  ];
  if (addresses.length > 0 && (target.scheme === 'https' || target.scheme === 'http')) {
    // Pin curl to the addresses just checked, so DNS cannot answer differently for git (rebinding).
    const list = addresses.map((a) => (net.isIPv6(a) ? `[${a}]` : a)).join(',');
    settings.push(`http.curloptResolve=${target.host}:${target.port}:${list}`);
  }
  return settings.flatMap((setting) => ['-c', setting]);
}

/**
 * The environment of every git process. ssh goes through Slipway's wrapper (GIT_SSH, run by git
 * with an argv, no shell), told the checked host and address: it connects to that address, so DNS
 * cannot answer differently for ssh than for the check (rebinding), as curloptResolve does for http.
 */
async function gitChildEnv(options: GitOptions, target: RepoTarget, addresses: string[]): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(options.gitEnv)) {
    if (!key.startsWith('GIT_') && !key.startsWith('SSH_') && !key.startsWith('SLIPWAY_GIT_SSH_')) env[key] = value;
  }
  const pinned: Record<string, string> = target.scheme === 'ssh' && addresses[0] !== undefined ? { [SSH_ENV.address]: addresses[0] } : {};
  const connectTimeout = Math.max(1, Math.ceil(options.timeoutMs / 1000));
  return {
    ...env,
    LC_ALL: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ALLOW_PROTOCOL: options.allowPrivate ? 'https:http:git:ssh:file' : 'https:http:git:ssh',
    GIT_PROTOCOL_FROM_USER: '0',
    GIT_SSH: await gitSshProgram(),
    GIT_SSH_VARIANT: 'ssh',
    [SSH_ENV.host]: target.host,
    [SSH_ENV.connectTimeout]: String(connectTimeout),
    ...pinned,
  };
}

interface RunOptions {
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  onStderr?: (text: string) => void;
}

/** Runs git with an argv array in its own process group; rejects with a readable, redacted message. */
function runGit(args: string[], run: RunOptions): Promise<string> {
  const what = `git ${args.find((a, i) => i > 0 && args[i - 1] !== '-c' && a !== '-c') ?? ''}`.trim();
  return new Promise((resolve, reject) => {
    if (run.signal?.aborted === true) {
      reject(abortError(what));
      return;
    }
    // detached: own process group (so a kill reaches git-remote-https/ssh too) and no terminal to prompt on.
    const child = spawn('git', args, { cwd: run.cwd, env: run.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderrTail = '';
    let settled = false;

    const finish = (error: Error | null, value = ''): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      run.signal?.removeEventListener('abort', onAbort);
      if (error === null) resolve(value);
      else reject(error);
    };
    const kill = (): void => {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const onAbort = (): void => {
      kill();
      finish(abortError(what));
    };
    const timer = setTimeout(() => {
      kill();
      const error = new Error(`${what} timed out after ${Math.round(run.timeoutMs / 1000)}s`);
      error.name = 'TimeoutError';
      finish(error);
    }, run.timeoutMs);
    run.signal?.addEventListener('abort', onAbort, { once: true });

    child.stdout.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > MAX_STDOUT_BYTES) {
        kill();
        finish(new Error(`${what} produced more output than expected`));
        return;
      }
      stdout.push(chunk);
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      stderrTail = (stderrTail + text).slice(-STDERR_TAIL_BYTES);
      run.onStderr?.(redactCredentials(text));
    });
    child.on('error', (err) => finish(new Error(`${what} could not start: ${err.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) {
        finish(null, Buffer.concat(stdout).toString('utf8'));
        return;
      }
      const detail = lastLines(stderrTail) || (signal !== null ? `killed by ${signal}` : `exit code ${code}`);
      finish(new GitCommandError(`${what} failed: ${detail}`, stderrTail));
    });
  });
}

/** A git process that exited unsuccessfully; `stderr` (redacted) lets callers tell failures apart. */
class GitCommandError extends Error {
  readonly stderr: string;
  constructor(message: string, stderr: string) {
    super(redactCredentials(message));
    this.name = 'GitCommandError';
    this.stderr = redactCredentials(stderr);
  }
}

function abortError(what: string): Error {
  const error = new Error(`${what} was cancelled`);
  error.name = 'AbortError';
  return error;
}

/** The last few meaningful lines of git's stderr (progress lines dropped), redacted and bounded. */
function lastLines(stderr: string): string {
  const lines = stderr
    .split(/[\r\n]+/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !/^(remote: )?(Counting|Compressing|Enumerating|Receiving|Resolving|Total)\b/.test(line));
  return redactCredentials(lines.slice(-3).join(' | ')).slice(0, 600);
}

/**
 * Asks the remote (`git ls-remote`) for the commit of `branch`, or of its default branch (the HEAD
 * symref, whose name is returned) when `branch` is undefined.
 * Throws DomainError `validation_error` for a bad URL or branch, a refused host, an unknown branch or
 * an empty repository; a plain Error with a readable message (credentials redacted) when the repo
 * cannot be reached.
 */
export async function resolveCommit(
  repoUrl: string,
  branch: string | undefined,
  options: GitOptions,
): Promise<{ sha: string; branch: string }> {
  const tip = await branchTip(repoUrl, branch, options);
  if (tip.sha === null) {
    throw validationError(branch === undefined ? 'the repository has no commits on its default branch' : `branch "${branch}" does not exist in the repository`);
  }
  return { sha: tip.sha, branch: tip.branch };
}

/**
 * Like {@link resolveCommit}, but a branch the remote does not have (deleted, or an empty repository)
 * is an answer, `sha: null`, not an error: the webhook asks whether a pushed commit is still the tip.
 */
export async function branchTip(
  repoUrl: string,
  branch: string | undefined,
  options: GitOptions,
): Promise<{ sha: string | null; branch: string }> {
  if (branch !== undefined) {
    const problem = validateBranchName(branch);
    if (problem !== null) throw validationError(problem);
  }
  const { target, addresses } = await checkRepo(repoUrl, options.allowPrivate, options);
  const patterns = branch === undefined ? ['HEAD'] : [`refs/heads/${branch}`];
  const args = [...gitConfigArgs(options, target, addresses), 'ls-remote', '--symref', '--', remoteFor(repoUrl, target, addresses), ...patterns];
  // cwd "/" so no repository (and no repository config) around the server's working directory is read.
  const env = await gitChildEnv(options, target, addresses);
  const output = await runGit(args, { cwd: '/', env, timeoutMs: options.timeoutMs, signal: options.signal });

  const refs = new Map<string, string>();
  let headTarget: string | undefined;
  for (const line of output.split('\n')) {
    const [left = '', name = ''] = line.split('\t');
    if (left.startsWith('ref: ')) {
      if (name === 'HEAD') headTarget = left.slice('ref: '.length);
    } else if (SHA.test(left)) {
      refs.set(name, left);
    }
  }

  if (branch !== undefined) return { sha: refs.get(`refs/heads/${branch}`) ?? null, branch };
  const sha = refs.get('HEAD');
  if (sha === undefined) throw validationError('the repository has no commits on its default branch');
  if (headTarget === undefined || !headTarget.startsWith('refs/heads/')) {
    throw validationError('the repository does not name its default branch; set branch explicitly');
  }
  return { sha, branch: headTarget.slice('refs/heads/'.length) };
}

/**
 * Fetches exactly commit `sha` (depth 1, no tags, no submodules) into `destDir` (created; must be
 * empty) and checks it out detached, then verifies HEAD is `sha`. When the server refuses a fetch by
 * sha, fetches `branch` (or the remote's HEAD) instead, deepening up to 1000 commits to find `sha`,
 * and fails clearly if it is not there. Progress text (redacted) goes to `onOutput`.
 */
export async function fetchCommit(
  repoUrl: string,
  sha: string,
  destDir: string,
  options: GitOptions & { onOutput?: (text: string) => void; branch?: string; ref?: string },
): Promise<void> {
  if (!SHA.test(sha)) throw validationError('commit must be 40 lowercase hex characters');
  if (options.ref !== undefined && !PULL_REF.test(options.ref)) throw validationError('ref must be a pull request ref (refs/pull/<n>/head or refs/merge-requests/<n>/head)');
  if (options.branch !== undefined) {
    const problem = validateBranchName(options.branch);
    if (problem !== null) throw validationError(problem);
  }
  const { target, addresses } = await checkRepo(repoUrl, options.allowPrivate, options);
  const remote = remoteFor(repoUrl, target, addresses);
  await mkdir(destDir, { recursive: true });
  if ((await readdir(destDir)).length > 0) throw new Error('the directory to fetch into is not empty');

  const config = gitConfigArgs(options, target, addresses);
  const run: RunOptions = { cwd: destDir, env: await gitChildEnv(options, target, addresses), timeoutMs: options.timeoutMs, signal: options.signal };
  if (options.onOutput !== undefined) run.onStderr = options.onOutput;
  // A dumb-HTTP server cannot serve a shallow fetch: the fetch is made again in full (said in the log).
  const git = withoutDepthWhenRefused((args: string[]): Promise<string> => runGit([...config, ...args], run), (err) => err instanceof GitCommandError && shallowUnsupported(err.stderr), options.onOutput);

  await git(['init', '-q', '--template=']);
  if (options.ref !== undefined) {
    // A pull request's head is fetched at the forge's ref for it: git's own error when it is not there.
    await fetchViaRef(git, remote, sha, options.ref, `the pull request ref ${options.ref}`, 'the pull request has moved on; its next event builds the new head');
  } else {
    try {
      await git(['fetch', '--depth=1', '--no-tags', '--no-recurse-submodules', '--progress', '--', remote, sha]);
    } catch (err) {
      if (!(err instanceof GitCommandError) || !refusedWant(err.stderr)) throw err;
      await fetchViaBranch(git, remote, sha, options);
    }
  }
  await git(['checkout', '-q', '--detach', sha, '--']);
  const head = (await git(['rev-parse', '--verify', 'HEAD^{commit}'])).trim();
  if (head !== sha) throw new Error(`checked out ${head} instead of ${sha}`);
}

/** True when git's stderr says the server will not serve an unadvertised object by sha. */
function refusedWant(stderr: string): boolean {
  return /not our ref|unadvertised object|does not allow request|no such remote ref|couldn't find remote ref/i.test(stderr);
}

/** A pull request's ref on GitHub, Gitea/Forgejo or GitLab. */
const PULL_REF = /^refs\/(?:pull|merge-requests)\/[1-9][0-9]{0,8}\/head$/;

/** Fallback for servers that refuse a want by sha: fetch the branch, deeper and deeper, until `sha` is there. */
async function fetchViaBranch(
  git: (args: string[]) => Promise<string>,
  repoUrl: string,
  sha: string,
  options: GitOptions & { onOutput?: (text: string) => void; branch?: string },
): Promise<void> {
  const ref = options.branch === undefined ? 'HEAD' : `refs/heads/${options.branch}`;
  const label = options.branch === undefined ? 'the default branch' : `branch "${options.branch}"`;
  options.onOutput?.(`The server does not serve commits by sha; fetching ${label} instead.\n`);
  await fetchViaRef(git, repoUrl, sha, ref, label, 'the server does not serve commits by sha; deploy again to build the current head');
}

/** Fetches `ref`, deeper and deeper, until `sha` is there. */
async function fetchViaRef(
  git: (args: string[]) => Promise<string>,
  repoUrl: string,
  sha: string,
  ref: string,
  label: string,
  whenMissing: string,
): Promise<void> {
  for (const depth of FALLBACK_DEPTHS) {
    await git(['fetch', `--depth=${depth}`, '--no-tags', '--no-recurse-submodules', '--progress', '--', repoUrl, ref]);
    const found = await git(['cat-file', '-e', `${sha}^{commit}`]).then(
      () => true,
      (err: unknown) => {
        if (err instanceof GitCommandError) return false;
        throw err;
      },
    );
    if (found) return;
  }
  const deepest = FALLBACK_DEPTHS[FALLBACK_DEPTHS.length - 1] ?? 0;
  throw new Error(`commit ${sha} is not among the last ${deepest} commits of ${label}: ${whenMissing}`);
}
