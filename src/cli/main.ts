// The `slipway` program: `server` runs the platform; every other command is the client.
import { Command } from 'commander';
import { runServer } from './server-command.js';

/** Parses argv and runs the chosen command. */
export async function runCli(argv: string[]): Promise<void> {
  const program = new Command('slipway')
    .description('Slipway: deploy apps from git or a folder, run them on Docker, expose local ports.')
    .showHelpAfterError();
  program
    .command('server')
    .description('run the Slipway server (API, dashboard, app router and tunnels on one port)')
    .addHelpText('after', '\nConfiguration comes from SLIPWAY_* environment variables (see docs/configuration.md).\n\nExample:\n  SLIPWAY_PORT=8080 slipway server')
    .action(runServer);
  await program.parseAsync(argv);
}
