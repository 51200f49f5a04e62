// Routes: the dashboard, a static page (public/) that drives the same public API as the CLI.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';

/** public/ of the project: this file runs from dist/src/api/routes/. */
const PUBLIC_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'public');

const ASSETS: Record<string, { file: string; type: string }> = {
  '/': { file: 'dashboard.html', type: 'text/html; charset=utf-8' },
  '/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

/** Serves the dashboard's three files, read once, with a strict content security policy. */
export const dashboardRoutes: FastifyPluginAsync = async (app) => {
  // Browsers ask for it on every page; there is none.
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) => reply.code(204).send());
  for (const [url, asset] of Object.entries(ASSETS)) {
    const body = fs.readFileSync(path.join(PUBLIC_DIR, asset.file));
    app.get(url, { schema: { hide: true } }, async (_request, reply) =>
      reply
        .type(asset.type)
        .header('Cache-Control', 'no-cache')
        .header('X-Content-Type-Options', 'nosniff')
        .header('X-Frame-Options', 'DENY')
        .header('Referrer-Policy', 'no-referrer')
        .header('Content-Security-Policy', "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
        .send(body),
    );
  }
};
