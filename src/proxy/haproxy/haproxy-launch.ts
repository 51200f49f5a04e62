// Starts the supervised HAProxy on the public ports, picking new ephemeral ports when another process took one meanwhile.
import type { Config } from '../../config.js';
import type { CertificateSource } from '../certificate-source.js';
import type { RoutingTable } from '../routing-table.js';
import { freePort } from './haproxy-binary.js';
import { HaproxyDataPlane, type HaproxyDataPlaneOptions } from './haproxy-data-plane.js';

export interface LaunchedHaproxy {
  readonly plane: HaproxyDataPlane;
  readonly port: number;
  /** The TLS port HAProxy terminates on (HTTPS on), else undefined. */
  readonly httpsPort: number | undefined;
}

/**
 * An ephemeral public port (SLIPWAY_PORT=0: tests, benchmarks) is probed free, then bound by
 * HAProxy: another process may take it in between, so a bind refusal there picks new ports (5 tries).
 * With `certificates`, HAProxy terminates TLS with them (loaded over its runtime API).
 */
export async function launchHaproxy(binary: string, config: Config, table: RoutingTable, certificates: CertificateSource | undefined, log: HaproxyDataPlaneOptions['log']): Promise<LaunchedHaproxy> {
  const https = certificates === undefined ? undefined : config.https;
  const ephemeral = config.port === 0 && (config.https === undefined || config.https.port === 0);
  for (let attempt = 1; ; attempt++) {
    const port = config.port === 0 ? await freePort(config.host) : config.port;
    const httpsPort = https === undefined ? undefined : https.port === 0 ? await freePort(config.host) : https.port;
    const plane = new HaproxyDataPlane({
      binary,
      dataDir: config.dataDir,
      domain: config.domain,
      table,
      bindHost: config.host,
      bindPort: port,
      limits: config.edge,
      publicProtocol: config.publicUrl.protocol.replace(':', ''),
      // With HTTPS on, the plain port answers ACME challenges and 308s from Node (which knows the
      // certificates): HAProxy passes plain requests to Node; requests over TLS take the fast path.
      fastPath: config.https === undefined,
      // On a host shared with Node and the apps, fewer threads than CPUs. Measured on 2 CPUs
      // (bench/tunnel, issue 14): one thread used 19–21 µs of CPU per tunnel request, two 23–29 µs;
      // app traffic (bench/router) showed no difference beyond the noise.
      threads: config.haproxyThreads,
      tls: httpsPort === undefined || certificates === undefined ? undefined : { port: httpsPort, certificates },
      log,
    });
    try {
      await plane.start();
      return { plane, port, httpsPort };
    } catch (err) {
      await plane.close().catch(() => undefined);
      if (ephemeral && attempt < 5 && /address already in use/i.test(String(err))) {
        log('warn', `HAProxy could not bind the ephemeral port ${port} (taken meanwhile); trying another`);
        continue;
      }
      throw err;
    }
  }
}
