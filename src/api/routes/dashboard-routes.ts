// Routes: the dashboard, static files (public/) that drive the same public API as the CLI: no build step.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';

/** public/ of the project: this file runs from dist/src/api/routes/. */
const PUBLIC_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'public');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.txt': 'text/plain; charset=utf-8',
};

/** No script, style, font, image or connection from anywhere but this origin; no framing. */
export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** `/` and the files of public/ui/ at `/ui/<name>`, read once at start. */
function assets(): Map<string, { body: Buffer; type: string }> {
  const out = new Map<string, { body: Buffer; type: string }>();
  out.set('/', { body: fs.readFileSync(path.join(PUBLIC_DIR, 'dashboard.html')), type: TYPES['.html']! });
  // The API reference, drawn from GET /api/v1/openapi.json (no login needed, as the document itself).
  out.set('/reference', { body: fs.readFileSync(path.join(PUBLIC_DIR, 'reference.html')), type: TYPES['.html']! });
  // public/ui/ and the libraries vendored in public/ui/vendor/ (served from here: the CSP allows no other host).
  for (const dir of ['ui', 'ui/vendor']) {
    for (const name of fs.readdirSync(path.join(PUBLIC_DIR, dir))) {
      const type = TYPES[path.extname(name)];
      if (type !== undefined) out.set(`/${dir}/${name}`, { body: fs.readFileSync(path.join(PUBLIC_DIR, dir, name)), type });
    }
  }
  return out;
}

/** Serves the dashboard with a strict content security policy. */
export const dashboardRoutes: FastifyPluginAsync = async (app) => {
  // Browsers ask for it on every page; there is none.
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) => reply.code(204).send());
  for (const [url, asset] of assets()) {
    app.get(url, { schema: { hide: true } }, async (_request, reply) =>
      reply
        .type(asset.type)
        .header('Cache-Control', 'no-cache')
        .header('X-Content-Type-Options', 'nosniff')
        .header('X-Frame-Options', 'DENY')
        .header('Referrer-Policy', 'no-referrer')
        .header('Content-Security-Policy', DASHBOARD_CSP)
        .send(asset.body),
    );
  }
};
