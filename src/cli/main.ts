// The `slipway` program: `server` runs the platform; every other command is the client.
import { Command, CommanderError } from 'commander';
import { CliError, EXIT_FAILURE, EXIT_USAGE } from './cli-error.js';
import { processIo, type CliIo } from './cli-io.js';
import { registerAppCommands } from './commands/app-commands.js';
import { registerAuthCommands } from './commands/auth-commands.js';
import { registerDeployCommand } from './commands/deploy-command.js';
import { registerEnvCommands } from './commands/env-commands.js';
import { registerDomainCommands } from './commands/domain-commands.js';
import { registerWebhookCommands } from './commands/webhook-commands.js';
import { registerPreviewCommands } from './commands/preview-commands.js';
import { registerKeyCommands } from './commands/key-commands.js';
import { registerNodeCommands } from './commands/node-commands.js';
import { registerTeamCommands } from './commands/team-commands.js';
import { registerTunnelCommand } from './commands/tunnel-command.js';
import { registerDbCommands } from './commands/db-commands.js';
import { registerDestinationCommands } from './commands/backup-commands.js';
import { registerServerOperateCommands } from './commands/server-operate-commands.js';
import { registerJobsCommands } from './commands/jobs-commands.js';
import { registerDockerfileCommand } from './commands/dockerfile-command.js';
import { registerNotifyCommands } from './commands/notify-commands.js';
import { runServer } from './server-run.js';
import { registerCreateCommand } from './commands/create-command.js';
import { VERSION } from '../version.js';

export { VERSION };

/**
 * Builds the whole program on `io`. Commands added to the result afterwards (e.g. `tunnel`)
 * inherit the output and exit handling: throw a CliError to fail with a one-line message.
 */
export function buildProgram(io: CliIo): Command {
  const program = new Command('slipway')
    .description('Slipway: deploy apps from git or a folder, run them on Docker, expose local ports.')
    .version(`slipway ${VERSION}`, '-V, --version', 'print the version')
    .showHelpAfterError('(add --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void io.stdout.write(text),
      writeErr: (text) => void io.stderr.write(text),
    })
    .addHelpText(
      'after',
      `
Getting started:
  slipway login --url http://localhost:8080
  slipway deploy ./my-app
  slipway apps

Environment: SLIPWAY_URL and SLIPWAY_API_KEY override the saved login. See docs/cli.md.`,
    );
  const server = program
    .command('server')
    .description('run the Slipway server (API, dashboard, app router and tunnels on one port)')
    .addHelpText('after', '\nConfiguration comes from SLIPWAY_* environment variables (see docs/configuration.md).\n\nExamples:\n  SLIPWAY_PORT=8080 slipway server\n  slipway server reset-password admin@example.com')
    .action(runServer);
  server
    .command('reset-password')
    .argument('<email>', "the user's e-mail")
    .description("set a new password for a user, on the server host (the server's SLIPWAY_* configuration names the database)")
    .option('--password-stdin', 'read the new password from the first line of stdin instead of generating one')
    .addHelpText(
      'after',
      '\nPrints a new random password once (or takes one from stdin) and logs the user out everywhere;\ntwo-factor login is turned off too (a lost authenticator is recovered this way).\nAPI keys keep working. Works while the server runs.\n\nExamples:\n  slipway server reset-password admin@localhost\n  printf \'%s\\n\' "$NEW_PASSWORD" | slipway server reset-password ops@example.com --password-stdin',
    )
    .action(async (email: string, options: { passwordStdin?: boolean }) => (await import('./server-command.js')).runResetPassword(io, email, options));
  server
    .command('rotate-key')
    .description('re-encrypt the app configuration under a new installation key (stop the server first)')
    .addHelpText(
      'after',
      '\nWith the key in <data>/secret.key, a new key is generated there. With SLIPWAY_SECRET_KEY, set\n' +
        'SLIPWAY_NEW_SECRET_KEY to the new key, then set SLIPWAY_SECRET_KEY to it before the next start.\n\n' +
        'Example:\n  slipway server rotate-key',
    )
    // Loaded when used: the database and secrets modules would slow every other command's start.
    .action(async () => (await import('./server-command.js')).rotateKey());
  server
    .command('cleanup')
    .description("remove the installation's networks and firewall chains that nothing uses (stop the server first)")
    .option('--remove-containers', "remove the installation's app containers first, so their network goes too (apps stop; the next start runs them again)")
    .option('--host-firewall', "also remove Slipway's host-wide firewall chains when no installation on this host uses them (run it only when no other Slipway runs here)")
    .addHelpText(
      'after',
      '\nA clean stop (Ctrl-C) already removes what no app uses; this removes what a killed server or a\n' +
        'stopped engine left. Chains shared by installations go only with --host-firewall, when none uses them.\n\n' +
        'Examples:\n  slipway server cleanup\n  slipway server cleanup --remove-containers --host-firewall',
    )
    .action(async (options: { removeContainers?: boolean; hostFirewall?: boolean }) => (await import('./server-command.js')).runCleanup(io, options));
  registerServerOperateCommands(server, io);
  registerAuthCommands(program, io);
  registerDeployCommand(program, io);
  registerCreateCommand(program, io);
  registerAppCommands(program, io);
  registerNodeCommands(program, io);
  registerEnvCommands(program, io);
  registerDomainCommands(program, io);
  registerWebhookCommands(program, io);
  registerPreviewCommands(program, io);
  registerKeyCommands(program, io);
  registerTeamCommands(program, io);
  registerTunnelCommand(program, io);
  registerDbCommands(program, io);
  registerDestinationCommands(program, io);
  registerJobsCommands(program, io);
  registerDockerfileCommand(program, io);
  registerNotifyCommands(program, io);
  return program;
}

/**
 * Runs `argv` on `program` and returns the exit code: 0, 1 for a failure (printed as
 * `error: message` on stderr), 2 for a usage error, 130 when interrupted.
 */
export async function runProgram(program: Command, argv: string[], io: CliIo): Promise<number> {
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    // Commander has already printed its own message (or the help).
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE;
    if (err instanceof CliError) {
      io.stderr.write(`error: ${err.message}\n`);
      return err.exitCode;
    }
    io.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_FAILURE;
  }
}

/** Parses argv and runs the chosen command on the real process; sets the exit code. */
export async function runCli(argv: string[]): Promise<void> {
  const io = processIo();
  const code = await runProgram(buildProgram(io), argv, io);
  if (code !== 0) process.exitCode = code;
}
