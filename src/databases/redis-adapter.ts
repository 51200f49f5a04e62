// The Redis engine: redis-server with a password and an append-only file in /data, port 6379, probed with redis-cli.
import type { EngineAdapter } from './engine-adapter.js';
import { redisGreeting } from './greeting.js';

export const redisAdapter: EngineAdapter = {
  engine: 'redis',
  imageSetting: 'SLIPWAY_DB_IMAGE_REDIS',
  port: 6379,
  dataDir: '/data',
  credentials: (_name, password) => ({ username: 'default', password, database: '0' }),
  environment: () => ({}),
  // The append-only file makes every acknowledged write survive a stop, a restart or a crash.
  command: (c) => ['redis-server', '--requirepass', c.password, '--appendonly', 'yes', '--dir', '/data'],
  url: (c, host) => `redis://${c.username}:${encodeURIComponent(c.password)}@${host}:6379/${c.database}`,
  probe: (c) => ({ argv: ['redis-cli', '-h', '127.0.0.1', '-p', '6379', 'ping'], env: { REDISCLI_AUTH: c.password } }),
  ready: (result) => result.exitCode === 0 && result.output.includes('PONG'),
  greeting: redisGreeting,
  // An RDB snapshot streamed by the replication protocol to stdout.
  dump: (c) => ({ argv: ['redis-cli', '-h', '127.0.0.1', '-p', '6379', '--no-auth-warning', '--rdb', '-'], env: { REDISCLI_AUTH: c.password } }),
  restoreMode: 'file',
  // Written beside the server's own files under a name no save of the running server writes over.
  restore: () => ({ argv: ['dd', 'of=/data/slipway-restore.rdb', 'bs=1M', 'status=none'], env: {} }),
  restoreFile: '/data/slipway-restore.rdb',
  // Started from the RDB file without the append-only file and without saving over it; the
  // append-only file is switched on afterwards (CONFIG SET rewrites it from the loaded data).
  restoreCommand: (c) => ['redis-server', '--requirepass', c.password, '--appendonly', 'no', '--save', '', '--dir', '/data', '--dbfilename', 'slipway-restore.rdb'],
  // Redis 7 writes a new base from the loaded data and swaps its manifest in one rename: until
  // then the previous append-only file stays whole (a failure leaves the old data).
  adoptRestore: (c) => [{ argv: ['redis-cli', '-h', '127.0.0.1', '-p', '6379', '--no-auth-warning', 'config', 'set', 'appendonly', 'yes'], env: { REDISCLI_AUTH: c.password } }],
  adoption: (c) => ({ argv: ['redis-cli', '-h', '127.0.0.1', '-p', '6379', '--no-auth-warning', 'info', 'persistence'], env: { REDISCLI_AUTH: c.password } }),
  adopted: (result) => {
    const field = (name: string): string | undefined => new RegExp(`^${name}:(\\S+)`, 'm').exec(result.output)?.[1];
    if (result.exitCode !== 0) return false;
    if (field('aof_enabled') !== '1' || field('aof_rewrite_in_progress') !== '0' || field('aof_rewrite_scheduled') !== '0') return false;
    return field('aof_last_bgrewrite_status') === 'ok' ? true : `rewriting the append-only file failed (${field('aof_last_bgrewrite_status') ?? 'unknown'})`;
  },
  inventory: (c) => ({ argv: ['redis-cli', '-h', '127.0.0.1', '-p', '6379', '--no-auth-warning', 'dbsize'], env: { REDISCLI_AUTH: c.password } }),
  parseInventory: (output) => ({ keys: Number(/(\d+)/.exec(output)?.[1] ?? Number.NaN) }),
  dumpExtension: 'rdb',
};
