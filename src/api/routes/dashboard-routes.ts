// Routes: the dashboard, static files (public/) that drive the same public API as the CLI: no build step.
import fs from 'node:fs';
import { createRequire } from 'node:module';
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

/**
 * Browser libraries the dashboard imports, served from their installed npm packages (dependencies in
 * package.json, never copied into public/): URL under /ui/vendor/ → package and file in it.
 */
const VENDOR_FILES: ReadonlyArray<readonly [string, string, string]> = [
  ['uplot.esm.js', 'uplot', 'dist/uPlot.esm.js'],
  ['uplot.min.css', 'uplot', 'dist/uPlot.min.css'],
  ['uplot.LICENSE.txt', 'uplot', 'LICENSE'],
  ['qrcode.js', 'qrcode-generator', 'dist/qrcode.mjs'],
];

/** The folder of an installed package: the first node_modules on Node's search path that has it. */
function packageDir(name: string): string {
  const searched = createRequire(import.meta.url).resolve.paths(name) ?? [];
  const dir = searched.map((base) => path.join(base, name)).find((candidate) => fs.existsSync(path.join(candidate, 'package.json')));
  if (dir === undefined) throw new Error(`the dashboard needs the npm package ${name}: run npm install`);
  return dir;
}

/** No script, style, font, image or connection from anywhere but this origin; no framing. */
export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** `/` and the files of public/ui/ at `/ui/<name>`, read once at start. */
function assets(): Map<string, { body: Buffer; type: string }> {
  const out = new Map<string, { body: Buffer; type: string }>();
  out.set('/', { body: fs.readFileSync(path.join(PUBLIC_DIR, 'dashboard.html')), type: TYPES['.html']! });
  // The API reference, drawn from GET /api/v1/openapi.json (no login needed, as the document itself).
  out.set('/reference', { body: fs.readFileSync(path.join(PUBLIC_DIR, 'reference.html')), type: TYPES['.html']! });
  for (const name of fs.readdirSync(path.join(PUBLIC_DIR, 'ui'))) {
    const type = TYPES[path.extname(name)];
    if (type !== undefined) out.set(`/ui/${name}`, { body: fs.readFileSync(path.join(PUBLIC_DIR, 'ui', name)), type });
  }
  // The libraries, served from here too: the CSP allows no other host.
  for (const [url, pkg, file] of VENDOR_FILES) {
    out.set(`/ui/vendor/${url}`, { body: fs.readFileSync(path.join(packageDir(pkg), file)), type: TYPES[path.extname(url)]! });
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
