// Baseline for bench/api: a bare Fastify route answering a fixed JSON body (read from stdin), on loopback.
import fastify from 'fastify';

async function main(): Promise<void> {
  let body = '';
  for await (const chunk of process.stdin) body += String(chunk);
  const payload: unknown = JSON.parse(body);
  const app = fastify();
  app.get('/api/v1/deployments', async () => payload);
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  process.stdout.write(`listening on ${address}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
