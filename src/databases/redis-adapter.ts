// The Redis engine: redis-server with a password and an append-only file in /data, port 6379, probed with redis-cli.
import type { EngineAdapter } from './engine-adapter.js';

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
};
