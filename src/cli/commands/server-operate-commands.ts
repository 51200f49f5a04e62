// `slipway server install`, `backup` and `restore`: running Slipway itself as a service, and its own backups.
import type { Command } from 'commander';
import type { CliIo } from '../cli-io.js';

/** Adds the operating commands under `slipway server`. */
export function registerServerOperateCommands(server: Command, io: CliIo): void {
  server
    .command('install')
    .description('write the systemd unit slipway.service (and its settings file), then enable and start it when systemd runs')
    .option('--settings-file <path>', 'the settings file the unit reads (created 0600 from the current SLIPWAY_* settings unless it exists)', '/etc/slipway/slipway.env')
    .option('--unit-file <path>', 'where the unit is written', '/etc/systemd/system/slipway.service')
    .option('--print', 'print the unit and write nothing')
    .addHelpText(
      'after',
      '\nRun it with the settings the server should keep (SLIPWAY_DOMAIN, SLIPWAY_PORT, …) in the environment.\n\n' +
        'Examples:\n  sudo SLIPWAY_DOMAIN=apps.example.com SLIPWAY_PORT=80 SLIPWAY_HTTPS_PORT=443 SLIPWAY_DATA_DIR=/var/lib/slipway slipway server install\n  slipway server install --print',
    )
    .action(async (options: { settingsFile?: string; unitFile?: string; print?: boolean }) => (await import('../server-install.js')).runInstall(io, options));
}
