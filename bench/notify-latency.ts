// Benchmark (issue 37): seconds from an app event to its receipt at a local signed-webhook receiver, through the server's outbox, one at a time and in a burst. Run: node dist/bench/notify-latency.js [--events 200] [--burst 50]
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestServer } from '../test/helpers/server.js';

const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(name);
  return index === -1 ? fallback : (process.argv[index + 1] ?? fallback);
};
const events = Number(arg('--events', '200'));
const burst = Number(arg('--burst', '50'));

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
};
const report = (label: string, ms: number[]): void =>
  console.log(`${label.padEnd(28)} n=${ms.length}  p50 ${quantile(ms, 0.5).toFixed(1)} ms  p99 ${quantile(ms, 0.99).toFixed(1)} ms  max ${Math.max(...ms).toFixed(1)} ms`);

// The receiver: each delivery's release id → when it arrived.
const arrived = new Map<string, number>();
const waiting = new Map<string, () => void>();
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = performance.now();
    res.end('ok');
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { message: string };
    const release = /release ([0-9a-f-]{36})/.exec(body.message)?.[1] ?? body.message;
    arrived.set(release, at);
    waiting.get(release)?.();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
const receipt = (key: string): Promise<void> => (arrived.has(key) ? Promise.resolve() : new Promise((resolve) => waiting.set(key, resolve)));

const ts = await startTestServer({ SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true' });
try {
  const { token } = await ts.newUser('bench-notify');
  const subdomain = `bn${crypto.randomBytes(4).toString('hex')}`;
  const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive' } });
  const channel = await ts.request('POST', '/api/v1/notification-channels', { token, body: { name: 'bench', type: 'webhook', url: `${receiverUrl}/hook`, events: ['app.crashed'] } });
  if (created.status !== 201 || channel.status !== 201) throw new Error(`${created.text} ${channel.text}`);
  const deploymentId = created.json.id as string;
  // The message names the restarts and `since`: the release id is carried in `since` so the receiver can match it.
  const emit = (): { key: string; at: number } => {
    const key = crypto.randomUUID();
    const at = performance.now();
    ts.server.appEvents.emit({ type: 'app.crashed', deploymentId, subdomain, releaseId: key, since: `release ${key}`, restarts: 3, exitCode: 1, lastLine: null });
    return { key, at };
  };

  // The floor: the same POST straight from this process to the receiver.
  const floor: number[] = [];
  for (let i = 0; i < events; i++) {
    const key = crypto.randomUUID();
    const at = performance.now();
    const done = receipt(key);
    await fetch(`${receiverUrl}/floor`, { method: 'POST', body: JSON.stringify({ message: `x release ${key}` }) });
    await done;
    floor.push((arrived.get(key) ?? 0) - at);
  }

  const sequential: number[] = [];
  for (let i = 0; i < events; i++) {
    const { key, at } = emit();
    await receipt(key);
    sequential.push((arrived.get(key) ?? 0) - at);
  }

  const sent = Array.from({ length: burst }, () => emit());
  await Promise.all(sent.map((s) => receipt(s.key)));
  const bursty = sent.map((s) => (arrived.get(s.key) ?? 0) - s.at);

  const load = (await import('node:os')).loadavg()[0]?.toFixed(1);
  console.log(`notification latency, event → receipt at a local webhook receiver (SQLite, load average ${load})`);
  report('direct POST (floor)', floor);
  report('one event at a time', sequential);
  report(`a burst of ${burst} at once`, bursty);
  console.log(`goal: p99 < 2000 ms — ${quantile([...sequential, ...bursty], 0.99) < 2000 ? 'met' : 'NOT met'}`);
} finally {
  await ts.close();
  receiver.close();
}
