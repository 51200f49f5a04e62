// The configuration of a `slipway server…` process: a bad setting ends the process with its message.
import { ConfigError, loadConfig, type Config } from '../config.js';
import { EXIT_CANNOT_START } from './supervisor.js';

/** Parses the environment once; on a bad value prints `configuration error: …` and exits (code 2, not restarted). */
export function loadServerConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`slipway: configuration error: ${err.message}\n`);
      process.exit(EXIT_CANNOT_START);
    }
    throw err;
  }
}
