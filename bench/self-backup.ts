// Benchmark: `slipway server backup`'s snapshot (online backup + tar + encryption) against SQLite's own online backup of the same database.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { openDatabase } from '../src/db/database.js';
import { fileSink } from '../src/operate/file-sink.js';
import { takeSelfBackup } from '../src/operate/self-backup.js';

const rowsArg = process.argv.indexOf('--rows');
const rows = rowsArg === -1 ? 200_000 : Number(process.argv[rowsArg + 1]);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-bench-self-backup-'));
try {
  await (await openDatabase({ file: path.join(dir, 'slipway.db') })).destroy();
  const sqlite = new SQLite(path.join(dir, 'slipway.db'));
  sqlite.prepare("insert into users (id, email, password_hash, is_admin, created_at, updated_at) values ('u', 'u@x', 'h', 0, 't', 't')").run();
  const insert = sqlite.prepare("insert into audit_log (id, at, actor_id, actor_email, via, action, target_type, target_id, team_id, ip, outcome) values (?, 't', 'u', 'u@x', 'session', 'deployment.create', 'deployment', ?, null, '127.0.0.1', 'success')");
  sqlite.transaction(() => {
    for (let i = 0; i < rows; i++) insert.run(crypto.randomUUID(), crypto.randomUUID());
  })();
  sqlite.close();
  for (let round = 1; round <= 3; round++) {
    let started = Date.now();
    const live = new SQLite(path.join(dir, 'slipway.db'));
    await live.backup(path.join(dir, 'plain.db'));
    live.close();
    const plainMs = Date.now() - started;
    const plainSize = fs.statSync(path.join(dir, 'plain.db')).size;
    started = Date.now();
    await takeSelfBackup({ dataDir: dir, databaseUrl: undefined, installationKey: crypto.randomBytes(32), version: 'bench' }, fileSink(fs.openSync(path.join(dir, 'self.backup'), 'wx', 0o600)));
    const selfMs = Date.now() - started;
    const selfSize = fs.statSync(path.join(dir, 'self.backup')).size;
    process.stdout.write(`round ${round}: sqlite .backup ${plainMs} ms ${plainSize} B; self-backup ${selfMs} ms ${selfSize} B; time ×${(selfMs / plainMs).toFixed(2)}, size ×${(selfSize / plainSize).toFixed(3)}; load ${os.loadavg()[0]?.toFixed(1)}\n`);
    fs.rmSync(path.join(dir, 'plain.db'));
    fs.rmSync(path.join(dir, 'self.backup'));
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
