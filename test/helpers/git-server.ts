// Test helper: a real smart-HTTP git server on 127.0.0.1 (`git http-backend` as CGI) with repos to commit to.
import { spawn, execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * A fixed, minimal PATH for git children in tests: tests must not read `process.env`, and a fixed
 * PATH keeps them hermetic (git lives in one of these on every supported system).
 */
export const TEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface GitServerOptions {
  /** Answer protocol v2 when the client asks for it (default true). False forces protocol v0. */
  protocolV2?: boolean;
  /** Let clients fetch any reachable commit by sha (default true). */
  allowShaInWant?: boolean;
}

export interface GitServer {
  /** Base URL, `http://127.0.0.1:<port>`; a repo `name` is served at `<url>/<name>.git`. */
  url: string;
  /** Temporary directory holding the bare repos (`repos/`), working clones (`work/`) and a HOME. */
  root: string;
  /** Environment for git children in tests: a fixed PATH and a throwaway HOME. */
  gitEnv: Record<string, string>;
  /** Creates a bare repo whose default branch is `options.branch` (default `main`) with one commit of `files`. */
  createRepo(name: string, files: Record<string, string>, options?: { branch?: string }): Promise<{ url: string; sha: string }>;
  /** Commits `files` on `options.branch` (default: the current one; created from it when new) and pushes; returns the new sha. */
  commit(name: string, files: Record<string, string>, options?: { branch?: string; message?: string }): Promise<string>;
  /**
   * Sets `ref` (e.g. `refs/pull/3/head`) in repo `name` to the current commit of `from`'s working
   * clone (default: `name`'s own), as a forge keeps a pull request's head, a fork's included. Returns its sha.
   */
  setRef(name: string, ref: string, options?: { from?: string }): Promise<string>;
  close(): Promise<void>;
}

/** Starts the server on an ephemeral port of 127.0.0.1. Call `close()` to stop it and remove its files. */
export async function startGitServer(options: GitServerOptions = {}): Promise<GitServer> {
  const protocolV2 = options.protocolV2 ?? true;
  const allowShaInWant = options.allowShaInWant ?? true;
  const root = await mkdtemp(path.join(os.tmpdir(), 'slipway-git-server-'));
  const reposDir = path.join(root, 'repos');
  const workDir = path.join(root, 'work');
  const home = path.join(root, 'home');
  await Promise.all([mkdir(reposDir), mkdir(workDir), mkdir(home)]);
  const baseEnv: Record<string, string> = {
    PATH: TEST_PATH,
    HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    LC_ALL: 'C',
  };

  const git = async (cwd: string, args: string[]): Promise<string> => {
    const identity = ['-c', 'user.name=Slipway Test', '-c', 'user.email=test@slipway.invalid', '-c', 'commit.gpgsign=false'];
    const { stdout } = await execFileAsync('git', [...identity, ...args], { cwd, env: baseEnv });
    return stdout.trim();
  };

  const server = createServer((req, res) => {
    serveCgi(req, res, reposDir, baseEnv, protocolV2).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const checkName = (name: string): void => {
    if (!/^[a-z0-9][a-z0-9._-]*$/i.test(name)) throw new Error(`bad test repo name: ${name}`);
  };

  const writeFiles = async (dir: string, files: Record<string, string>): Promise<void> => {
    for (const [file, content] of Object.entries(files)) {
      const target = path.join(dir, file);
      await mkdir(path.dirname(target), { recursive: true });
      await writeFile(target, content);
    }
  };

  const commitAndPush = async (name: string, work: string, branch: string, message: string): Promise<string> => {
    await git(work, ['add', '-A']);
    await git(work, ['commit', '-q', '--allow-empty', '-m', message]);
    await git(work, ['push', '-q', '--', path.join(reposDir, `${name}.git`), `HEAD:refs/heads/${branch}`]);
    return git(work, ['rev-parse', 'HEAD']);
  };

  return {
    url,
    root,
    gitEnv: { PATH: TEST_PATH, HOME: home },
    async createRepo(name, files, repoOptions = {}) {
      checkName(name);
      const branch = repoOptions.branch ?? 'main';
      const bare = path.join(reposDir, `${name}.git`);
      const work = path.join(workDir, name);
      await git(root, ['init', '-q', '--bare', `--initial-branch=${branch}`, '--', bare]);
      await git(bare, ['config', 'uploadpack.allowReachableSHA1InWant', String(allowShaInWant)]);
      await git(bare, ['config', 'uploadpack.allowAnySHA1InWant', String(allowShaInWant)]);
      await git(root, ['init', '-q', `--initial-branch=${branch}`, '--', work]);
      await writeFiles(work, files);
      const sha = await commitAndPush(name, work, branch, 'initial commit');
      return { url: `${url}/${name}.git`, sha };
    },
    async commit(name, files, commitOptions = {}) {
      checkName(name);
      const work = path.join(workDir, name);
      const current = await git(work, ['rev-parse', '--abbrev-ref', 'HEAD']);
      const branch = commitOptions.branch ?? current;
      if (branch !== current) {
        const exists = await git(work, ['rev-parse', '--verify', '-q', `refs/heads/${branch}`]).then(
          () => true,
          () => false,
        );
        await git(work, exists ? ['checkout', '-q', branch, '--'] : ['checkout', '-q', '-b', branch]);
      }
      await writeFiles(work, files);
      return commitAndPush(name, work, branch, commitOptions.message ?? 'update');
    },
    async setRef(name, ref, refOptions = {}) {
      checkName(name);
      const from = refOptions.from ?? name;
      checkName(from);
      const work = path.join(workDir, from);
      await git(work, ['push', '-q', '-f', '--', path.join(reposDir, `${name}.git`), `HEAD:${ref}`]);
      return git(work, ['rev-parse', 'HEAD']);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** Runs one request through `git http-backend` (RFC 3875 CGI): request body in, CGI headers parsed, body streamed out. */
async function serveCgi(
  req: IncomingMessage,
  res: ServerResponse,
  projectRoot: string,
  baseEnv: Record<string, string>,
  protocolV2: boolean,
): Promise<void> {
  const requestUrl = new URL(req.url ?? '/', 'http://127.0.0.1');
  const env: Record<string, string> = {
    ...baseEnv,
    GIT_PROJECT_ROOT: projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    REQUEST_METHOD: req.method ?? 'GET',
    PATH_INFO: decodeURIComponent(requestUrl.pathname),
    QUERY_STRING: requestUrl.search.slice(1),
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    SERVER_PROTOCOL: 'HTTP/1.1',
    GATEWAY_INTERFACE: 'CGI/1.1',
  };
  const header = (name: string): string | undefined => {
    const value = req.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const contentType = header('content-type');
  const contentLength = header('content-length');
  const contentEncoding = header('content-encoding');
  const gitProtocol = header('git-protocol');
  if (contentType !== undefined) env['CONTENT_TYPE'] = contentType;
  if (contentLength !== undefined) env['CONTENT_LENGTH'] = contentLength;
  if (contentEncoding !== undefined) env['HTTP_CONTENT_ENCODING'] = contentEncoding;
  if (gitProtocol !== undefined && protocolV2) env['GIT_PROTOCOL'] = gitProtocol;

  const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  req.pipe(child.stdin);
  child.stdin.on('error', () => undefined);

  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const crlf = head.indexOf('\r\n\r\n');
    const lf = head.indexOf('\n\n');
    const end = crlf !== -1 && (lf === -1 || crlf < lf) ? crlf : lf;
    if (end === -1) return;
    const separatorLength = end === crlf ? 4 : 2;
    headersDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (colon === -1) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + separatorLength));
  });
  await new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', () => resolve());
  });
  if (!headersDone && !res.headersSent) res.writeHead(502);
  res.end();
}
