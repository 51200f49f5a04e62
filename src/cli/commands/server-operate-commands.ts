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
  server
    .command('backup')
    .description("write an encrypted snapshot of Slipway's own state (database, uploaded sources, build logs; never the key) while it runs")
    .option('--file <path>', 'the file to write (never overwritten; 0600)')
    .option('--destination <id|name>', 'a backup destination (decisions §20): the backup becomes one object in it, its name printed')
    .addHelpText(
      'after',
      '\nRun it on the server host with the server\'s settings (SLIPWAY_DATA_DIR, SLIPWAY_DATABASE_URL, the key).\n' +
        'The file is encrypted under a key derived from the installation key, which it does not hold: keep the key apart.\n\n' +
        'Examples:\n  slipway server backup --file /backups/slipway-$(date +%F).slipway-backup\n  slipway server backup --destination offsite',
    )
    .action(async (options: { file?: string; destination?: string }) => (await import('../server-backup.js')).runSelfBackup(io, options));
  server
    .command('restore')
    .description('bring a self-backup back onto an empty data directory (server stopped, same installation key)')
    .option('--file <path>', 'the backup file')
    .option('--destination <id|name>', 'a backup destination of the installation in the data directory (with --force)')
    .option('--destination-settings <file>', 'on a new host: the destination as a JSON object (the fields of POST /api/v1/backup-destinations, the secret included)')
    .option('--backup <name>', 'with --destination or --destination-settings: the backup to restore (printed by `server backup`)')
    .option('--force', 'replace the installation found in the data directory (or database)')
    .addHelpText(
      'after',
      '\nOn a new host: copy the old secret.key into the new data directory (or set SLIPWAY_SECRET_KEY), restore, start.\n' +
        'Every deployment that was live is rebuilt and released at that start.\n\n' +
        'Examples:\n  SLIPWAY_DATA_DIR=/var/lib/slipway slipway server restore --file slipway-2026-11-28.slipway-backup\n' +
        '  SLIPWAY_DATA_DIR=/var/lib/slipway slipway server restore --destination-settings offsite.json --backup slipway-self-backup-2026-11-28T03-00-00-000Z.slipway-backup',
    )
    .action(async (options: { file?: string; destination?: string; destinationSettings?: string; backup?: string; force?: boolean }) => (await import('../server-backup.js')).runSelfRestore(io, options));
}
