// `slipway server install`: the systemd unit that runs this installation, and its settings file.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ConfigError, loadConfig, serverSettings } from '../config.js';
import { renderSettingsFile, renderUnit } from '../operate/systemd-unit.js';
import { CliError, EXIT_USAGE } from './cli-error.js';
import type { CliIo } from './cli-io.js';

const run = promisify(execFile);

export const DEFAULT_SETTINGS_FILE = '/etc/slipway/slipway.env';
export const DEFAULT_UNIT_FILE = '/etc/systemd/system/slipway.service';
const UNIT_NAME = 'slipway.service';

export interface InstallOptions {
  settingsFile?: string;
  unitFile?: string;
  print?: boolean;
}

/** The host as the install sees it; tests pass their own environment and no systemd. */
export interface InstallHost {
  /** The server settings' environment; undefined = this process's. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Whether systemd runs here (default: /run/systemd/system exists). */
  readonly systemdRunning?: () => boolean;
}

/** This installation's bin/slipway.js (this file runs from dist/src/cli/). */
function slipwayScript(): string {
  return fileURLToPath(new URL('../../../bin/slipway.js', import.meta.url));
}

/**
 * Writes the settings file (unless it exists: it is the operator's then, and kept as it is) and
 * the unit; with systemd running, reloads it and enables and starts the service. `--print` writes
 * nothing: the unit goes to stdout, the settings file's names to stderr.
 */
export async function runInstall(io: CliIo, options: InstallOptions, host: InstallHost = {}): Promise<void> {
  let settings: Record<string, string>;
  try {
    // The settings are checked as the server would: a bad value is refused here, not at the first boot.
    loadConfig(host.env);
    settings = serverSettings(host.env);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`, { exitCode: EXIT_USAGE });
    throw err;
  }
  const settingsFile = path.resolve(io.cwd, options.settingsFile ?? DEFAULT_SETTINGS_FILE);
  const unitFile = path.resolve(io.cwd, options.unitFile ?? DEFAULT_UNIT_FILE);
  const unit = renderUnit({ node: process.execPath, script: slipwayScript(), settingsFile });
  const settingsText = renderSettingsFile(settings);
  if (options.print === true) {
    io.stdout.write(unit);
    io.stderr.write(`# ${settingsFile} (0600) would hold: ${Object.keys(settings).sort().join(', ')}\n`);
    return;
  }
  const created = writeSettingsFile(settingsFile, settingsText);
  io.stderr.write(created ? `Wrote ${settingsFile} (0600) with ${Object.keys(settings).length} settings.\n` : `Kept the existing ${settingsFile}.\n`);
  try {
    fs.mkdirSync(path.dirname(unitFile), { recursive: true });
    fs.writeFileSync(unitFile, unit, { mode: 0o644 });
  } catch (err) {
    throw new CliError(`cannot write ${unitFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)} (run it as root, or --print the unit)`);
  }
  io.stderr.write(`Wrote ${unitFile}.\n`);
  if (!(host.systemdRunning ?? (() => fs.existsSync('/run/systemd/system')))()) {
    io.stderr.write(
      'systemd is not running on this host, so the service was not started. On a host with systemd:\n' +
        `  systemctl daemon-reload && systemctl enable --now ${UNIT_NAME}\n` +
        `Without systemd, run \`set -a; . ${settingsFile}; set +a; ${process.execPath} ${slipwayScript()} server\` under your own supervisor.\n`,
    );
    return;
  }
  for (const argv of [['daemon-reload'], ['enable', '--now', UNIT_NAME]]) {
    try {
      await run('systemctl', argv, { timeout: 120_000 });
    } catch (err) {
      const detail = (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
      throw new CliError(`systemctl ${argv.join(' ')} failed: ${detail}`);
    }
  }
  io.stderr.write(`Enabled and started ${UNIT_NAME}. Follow it with: journalctl -u ${UNIT_NAME} -f\n`);
}

/** Creates the settings file 0600 (its directory 0700) unless it exists; true when created. */
function writeSettingsFile(file: string, text: string): boolean {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    // 'wx': never overwrites, so an operator's edits survive a second install.
    fs.writeFileSync(file, text, { mode: 0o600, flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new CliError(`cannot write ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)} (run it as root, or choose --settings-file)`);
  }
}
