// Command: slipway tunnel PORT — serve a local port at <subdomain>.<domain> through the server.
import type { Command } from 'commander';
import { API_KEY_PREFIX } from '../../core/credentials.js';
import { CliError } from '../cli-error.js';
import type { CliIo } from '../cli-io.js';
import { currentLogin, withJson, type JsonOption } from '../command-context.js';
import { runTunnelClient, TunnelRefusedError, type TunnelClientEvent } from '../../tunnel/tunnel-client.js';

interface TunnelOptions extends JsonOption {
  subdomain?: string;
  force?: boolean;
  host: string;
}

/** Registers `tunnel` on `program`. */
export function registerTunnelCommand(program: Command, io: CliIo): void {
  withJson(
    program
      .command('tunnel')
      .argument('<port>', 'the local port to expose')
      .option('--subdomain <name>', 'the name to serve at (default: a random one)')
      .option('--force', 'take the subdomain over from your other live tunnel on it (which stops)')
      .option('--host <address>', 'where the local app listens', '127.0.0.1')
      .description('expose a local port at <subdomain>.<domain> for as long as this runs (needs an API key)'),
  )
    .addHelpText(
      'after',
      `
Tunnels authenticate with an API key (not a login session):
  slipway keys create laptop
  SLIPWAY_API_KEY=slw_k1_… slipway tunnel 3000 --subdomain demo

Examples:
  slipway tunnel 3000
  slipway tunnel 8000 --subdomain my-demo
  slipway tunnel 5173 --host 127.0.0.1 --json      # one JSON event per line`,
    )
    .action(async (portText: string, options: TunnelOptions) => {
      const port = Number(portText);
      if (!Number.isInteger(port) || port < 1 || port > 65535) throw new CliError(`"${portText}" is not a port (1-65535)`, { exitCode: 2 });
      const login = await currentLogin(io);
      if (login.bearer === undefined || !login.bearer.startsWith(API_KEY_PREFIX)) {
        throw new CliError('tunnels need an API key: run `slipway keys create NAME`, then `slipway login --api-key KEY` or set SLIPWAY_API_KEY');
      }
      const controller = new AbortController();
      const stop = io.onInterrupt(() => controller.abort());
      const print = (event: TunnelClientEvent): void => {
        if (options.json === true) {
          io.stdout.write(`${JSON.stringify(event)}\n`);
          return;
        }
        switch (event.type) {
          case 'connected':
            io.stdout.write(`Forwarding ${event.url} -> http://${options.host}:${port}\n`);
            break;
          case 'request':
            io.stdout.write(`${new Date().toISOString().slice(11, 19)} ${event.method.padEnd(6)} ${event.path} ${event.status} ${event.ms} ms\n`);
            break;
          case 'disconnected':
            io.stderr.write(`disconnected (${event.reason}); reconnecting in ${(event.retryInMs / 1000).toFixed(1)} s…\n`);
            break;
          case 'error':
            io.stderr.write(`warning: ${event.message}\n`);
            break;
        }
      };
      try {
        await runTunnelClient({
          serverUrl: login.url,
          apiKey: login.bearer,
          port,
          host: options.host,
          ...(options.subdomain === undefined ? {} : { subdomain: options.subdomain }),
          force: options.force === true,
          signal: controller.signal,
          onEvent: print,
        });
      } catch (err) {
        if (err instanceof TunnelRefusedError) throw new CliError(err.message);
        throw err;
      } finally {
        stop();
      }
    });
}
