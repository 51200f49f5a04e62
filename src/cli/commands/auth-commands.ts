// Commands: login, logout, whoami, password.
import type { Command } from 'commander';
import { ApiClient } from '../api-client.js';
import type { LoginAnswer, MessageAnswer, User } from '../api-types.js';
import { CliError, EXIT_INTERRUPTED, usageError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { connect, currentLogin, withInterrupt, withJson, type JsonOption } from '../command-context.js';
import { configPath, normaliseServerUrl, readSavedLogin, writeSavedLogin } from '../credentials.js';
import { printJson } from '../output.js';
import { createPrompter } from '../prompt.js';

/** Where `login` goes when neither --url, SLIPWAY_URL nor a saved login says otherwise. */
export const DEFAULT_SERVER_URL = 'http://localhost:8080';

interface LoginOptions extends JsonOption {
  url?: string;
  email?: string;
  apiKey?: string;
  otp?: string;
}

/** Registers login, logout, whoami and password on `program`. */
export function registerAuthCommands(program: Command, io: CliIo): void {
  withJson(
    program
      .command('login')
      .description('log in to a Slipway server (e-mail and password, or an API key) and remember it')
      .option('--url <url>', `server URL (default: SLIPWAY_URL, the saved one, or ${DEFAULT_SERVER_URL})`)
      .option('--email <email>', 'e-mail address (asked when not given)')
      .option('--api-key <key>', 'log in with an API key instead of a password (checked with the server)')
      .option('--otp <code>', 'the two-factor code (not given: asked once after a refused login)'),
  )
    .addHelpText(
      'after',
      `
The password is asked on the terminal without echo; when stdin is not a terminal, the e-mail
and password are read as lines from stdin. Credentials are saved (mode 0600) in
$XDG_CONFIG_HOME/slipway/config.json (default ~/.config/slipway/config.json).

Examples:
  slipway login --url http://localhost:8080
  slipway login --url https://slipway.example.com --email me@example.com
  slipway login --url https://slipway.example.com --api-key slw_k1_...
  printf 'me@example.com\\nmy-password\\n' | slipway login --url http://localhost:8080`,
    )
    .action((options: LoginOptions) => withInterrupt(io, (signal) => login(io, options, signal)));

  withJson(program.command('logout').description('end the saved session and forget the saved credentials'))
    .addHelpText('after', '\nAn API key saved with `login --api-key` is only forgotten: revoke it with `slipway keys rm`.\n\nExample:\n  slipway logout')
    .action((options: JsonOption) => withInterrupt(io, (signal) => logout(io, options, signal)));

  withJson(program.command('whoami').description('show the logged-in user and server'))
    .addHelpText('after', '\nExamples:\n  slipway whoami\n  SLIPWAY_API_KEY=slw_k1_... SLIPWAY_URL=http://localhost:8080 slipway whoami --json')
    .action((options: JsonOption) =>
      withInterrupt(io, async (signal) => {
        const login = await currentLogin(io);
        const user = await new ApiClient({ url: login.url, bearer: login.bearer, signal }).request<User>('GET', '/api/v1/users/me');
        if (options.json === true) return printJson(io.stdout, user);
        const via = login.source === 'environment' ? ' (API key from SLIPWAY_API_KEY)' : '';
        io.stdout.write(`${user.email} at ${login.url}${via}\n`);
      }),
    );

  withJson(program.command('password').description('change your password (asks for the current and the new one)'))
    .addHelpText('after', '\nOther sessions are logged out; API keys keep working.\n\nExample:\n  slipway password')
    .action((options: JsonOption) =>
      withInterrupt(io, async (signal) => {
        const client = await connect(io, signal);
        const prompter = createPrompter(io, signal);
        let current: string;
        let next: string;
        try {
          current = await prompter.ask('Current password: ', { secret: true });
          next = await prompter.ask('New password (8 characters or more): ', { secret: true });
          const again = await prompter.ask('New password again: ', { secret: true });
          if (again !== next) throw new CliError('the new passwords do not match; nothing was changed');
        } finally {
          prompter.close();
        }
        const answer = await client.request<MessageAnswer>('PUT', '/api/v1/users/me/password', {
          body: { current_password: current, new_password: next },
        });
        if (options.json === true) return printJson(io.stdout, answer);
        io.stdout.write(`${answer.message}\n`);
      }),
    );
}

async function login(io: CliIo, options: LoginOptions, signal: AbortSignal): Promise<void> {
  const saved = await readSavedLogin(io.env.configDir);
  const url = normaliseServerUrl(options.url ?? io.env.url ?? saved.url ?? DEFAULT_SERVER_URL);
  if (options.apiKey !== undefined) {
    const user = await new ApiClient({ url, bearer: options.apiKey, signal }).request<User>('GET', '/api/v1/users/me');
    await writeSavedLogin(io.env.configDir, { url, api_key: options.apiKey, email: user.email });
    return reportLogin(io, options, url, user);
  }
  // Say that the server is down before asking for a password that cannot be used.
  await new ApiClient({ url, bearer: undefined, signal, timeoutMs: 15_000 }).reachable();
  const prompter = createPrompter(io, signal);
  let answer: LoginAnswer;
  try {
    if (io.stdin.isTTY === true) io.stderr.write(`Logging in to ${url}\n`);
    const email = (options.email ?? (await prompter.ask('Email: '))).trim();
    const password = await prompter.ask('Password: ', { secret: true });
    if (email === '' || password === '') throw usageError('e-mail and password are both needed');
    const client = new ApiClient({ url, bearer: undefined, signal });
    const attempt = (otp: string | undefined): Promise<LoginAnswer> =>
      client.request<LoginAnswer>('POST', '/api/v1/auth/login', { body: { email, password, ...(otp === undefined ? {} : { otp }) } });
    try {
      answer = await attempt(options.otp);
    } catch (err) {
      // The server refuses every failed login alike (it never says that only the code was missing),
      // so a refusal without --otp asks for a code once: from a terminal, or a third line of stdin.
      // No code (Enter, or stdin ended): the refusal stands.
      if (!(err instanceof CliError) || err.code !== 'invalid_credentials' || options.otp !== undefined) throw err;
      io.stderr.write(`${err.message}: if your account has two-factor login, give its code (Enter if not)\n`);
      const code = (
        await prompter.ask('Two-factor code: ').catch((asked: unknown) => {
          if (asked instanceof CliError && asked.exitCode === EXIT_INTERRUPTED) throw asked;
          return '';
        })
      ).trim();
      if (code === '') throw err;
      answer = await attempt(code);
    }
  } finally {
    prompter.close();
  }
  await writeSavedLogin(io.env.configDir, { url, token: answer.token, email: answer.user.email, expires_at: answer.expires_at });
  reportLogin(io, options, url, answer.user, answer.expires_at);
}

function reportLogin(io: CliIo, options: JsonOption, url: string, user: User, expiresAt?: string): void {
  if (options.json === true) return printJson(io.stdout, { url, user, ...(expiresAt === undefined ? {} : { expires_at: expiresAt }) });
  io.stdout.write(`Logged in to ${url} as ${user.email}.\n`);
  io.stderr.write(`Credentials saved in ${configPath(io.env.configDir)}\n`);
  if (io.env.apiKey !== undefined) io.stderr.write('note: SLIPWAY_API_KEY is set and takes precedence over this login\n');
}

async function logout(io: CliIo, options: JsonOption, signal: AbortSignal): Promise<void> {
  const saved = await readSavedLogin(io.env.configDir);
  const say = (text: string, result: Record<string, unknown>): void => {
    if (options.json === true) printJson(io.stdout, result);
    else io.stdout.write(`${text}\n`);
  };
  if (saved.token === undefined && saved.api_key === undefined) return say('Not logged in.', { logged_out: false });
  if (saved.token !== undefined && saved.url !== undefined) {
    try {
      await new ApiClient({ url: saved.url, bearer: saved.token, signal }).request('POST', '/api/v1/auth/logout');
    } catch (err) {
      // An expired session is as good as ended; anything else is worth a warning, not a failure.
      if (!(err instanceof CliError) || err.status !== 401) {
        if (signal.aborted) throw err;
        io.stderr.write(`warning: could not end the session on the server (${(err as Error).message}); forgetting it anyway\n`);
      }
    }
  }
  await writeSavedLogin(io.env.configDir, saved.url === undefined ? {} : { url: saved.url });
  if (saved.token === undefined) {
    return say('Forgot the saved API key. It still works: revoke it with `slipway keys rm ID`.', { logged_out: true, url: saved.url });
  }
  say(`Logged out of ${saved.url ?? 'the server'}.`, { logged_out: true, url: saved.url });
}
