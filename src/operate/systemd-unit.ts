// The systemd unit and settings file `slipway server install` writes (pure text, no I/O).

/** What the unit runs: the Node binary, this installation's bin/slipway.js, and the settings file. */
export interface UnitFacts {
  readonly node: string;
  readonly script: string;
  readonly settingsFile: string;
}

/**
 * One word of an ExecStart= line: quoted when it holds a space or a quote; `%` and `$` doubled,
 * since systemd would otherwise expand them as specifiers and variables.
 */
function execWord(word: string): string {
  const literal = word.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  return /[\s"'\\;]/.test(literal) ? `"${literal.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : literal;
}

/** A path in a unit setting other than ExecStart= (specifiers are expanded there too). */
function unitPath(file: string): string {
  return file.replace(/%/g, '%%');
}

/** The text of `slipway.service`. */
export function renderUnit(facts: UnitFacts): string {
  return [
    '# Slipway: written by `slipway server install`; settings in the EnvironmentFile below.',
    '[Unit]',
    'Description=Slipway, a self-hosted deployment platform',
    // Apps run on the local engine, and ACME, git and webhooks need the network up, not just configured.
    'Wants=network-online.target docker.service',
    'After=network-online.target docker.service',
    '',
    '[Service]',
    'Type=simple',
    `EnvironmentFile=${unitPath(facts.settingsFile)}`,
    `ExecStart=${[facts.node, facts.script, 'server'].map(execWord).join(' ')}`,
    'Restart=on-failure',
    'RestartSec=5',
    // A clean stop drains requests and stops the build queue; the supervisor needs a moment for it.
    'KillSignal=SIGTERM',
    'TimeoutStopSec=90',
    // Exit code 2 is a configuration error: starting again would fail the same way.
    'RestartPreventExitStatus=2',
    'LimitNOFILE=1048576',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

/** A value as systemd's EnvironmentFile= reads it back unchanged: single quotes (literal), else double quotes with escapes. */
function envValue(value: string): string {
  if (!value.includes("'")) return `'${value}'`;
  return `"${value.replace(/[\\"`$]/g, (c) => `\\${c}`)}"`;
}

/** The text of the settings file: one `NAME='value'` line per setting, names sorted. */
export function renderSettingsFile(settings: Readonly<Record<string, string>>): string {
  const lines = Object.keys(settings)
    .sort()
    .map((name) => {
      const value = settings[name] ?? '';
      if (/[\r\n\0]/.test(value)) throw new Error(`${name} holds a line break, which a systemd EnvironmentFile cannot carry`);
      return `${name}=${envValue(value)}`;
    });
  return ['# Slipway settings (docs/configuration.md), read by slipway.service. Keep this file 0600: it may hold secrets.', ...lines, ''].join('\n');
}
