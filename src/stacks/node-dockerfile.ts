// The Dockerfile of a Node.js app: dependencies in their own layers, the build with dev dependencies, production ones in the image.
import { comment, execForm, portLines } from './dockerfile-text.js';
import { DEFAULT_BASE_IMAGES, type BaseImages, type NodeFacts, type NodeInstall, type NodeOutput } from './stack-types.js';

/** The Node image: the configured one, or the default's family at engines.node's major version. */
export function nodeImage(facts: NodeFacts, images: BaseImages): string {
  if (facts.nodeMajor === undefined || images.node !== DEFAULT_BASE_IMAGES.node) return images.node;
  return `node:${facts.nodeMajor}-bookworm-slim`;
}

/** The install commands: [all dependencies (for the build), production dependencies only]. */
function installCommands(install: Extract<NodeInstall, { kind: 'manager' }>): [string, string] {
  switch (install.manager) {
    case 'npm':
      return install.lockfile === undefined ? ['npm install', 'npm install --omit=dev'] : ['npm ci', 'npm ci --omit=dev'];
    case 'pnpm':
      return install.lockfile === undefined ? ['pnpm install', 'pnpm install --prod'] : ['pnpm install --frozen-lockfile', 'pnpm install --frozen-lockfile --prod'];
    case 'yarn':
      if (install.yarnBerry) return ['yarn install --immutable', 'yarn install --immutable'];
      return install.lockfile === undefined ? ['yarn install', 'yarn install --production'] : ['yarn install --frozen-lockfile', 'yarn install --frozen-lockfile --production'];
  }
}

/** COPY of one path to the same place under the working directory (JSON form for names with spaces or quotes). */
function copySame(paths: readonly string[], dir: boolean): string {
  const target = dir ? `./${paths[0] ?? ''}` : './';
  const plain = [...paths, target].every((p) => /^[\w.@+/-]+$/.test(p));
  return plain ? `COPY ${[...paths, target].join(' ')}` : `COPY [${[...paths, target].map((p) => JSON.stringify(p)).join(', ')}]`;
}

/**
 * The source without node_modules/, copied entry by entry: vendored dependencies have their own
 * layer, and a `COPY . .` would copy them again with every change of the source.
 */
function copySourceWithoutModules(facts: NodeFacts, dockerfilePath: string): string[] {
  const files = facts.rootFiles.filter((f) => f !== dockerfilePath);
  return [
    comment('The source, entry by entry so node_modules/ (in its own layer) is not copied again; a new', 'top-level file or folder needs a line here.'),
    ...(files.length === 0 ? [] : [copySame(files, false)]),
    ...facts.rootDirs.map((d) => copySame([d], true)),
  ];
}

/** The Dockerfile body (after the header) for a Node app; `dockerfilePath` is where this file sits in the context. */
export function nodeDockerfile(facts: NodeFacts, images: BaseImages, dockerfilePath: string): string {
  const image = nodeImage(facts, images);
  const { install } = facts;
  const manifest = ['package.json', ...(install.kind === 'manager' && install.lockfile !== undefined ? [install.lockfile] : []), ...facts.installFiles];
  const copyManifest = `COPY ${manifest.join(' ')} ./`;
  const corepack = install.kind === 'manager' && install.corepack;
  const stages: string[] = [];
  const from = corepack ? 'base' : image;
  /** How the final stage gets the app: from the build stage, or straight from the context. */
  let appLines: string[];

  if (corepack && install.kind === 'manager') {
    stages.push([comment(`${install.manager} comes with Node through corepack (at the version packageManager names, if any).`), `FROM ${image} AS base`, 'RUN corepack enable'].join('\n'));
  }
  if (install.kind === 'manager') {
    const [all, production] = installCommands(install);
    stages.push([
      comment('Production dependencies, from the manifest and lockfile alone: this layer is reused', 'until they change, however often the source does.'),
      `FROM ${from} AS deps`,
      'WORKDIR /app',
      copyManifest,
      `RUN ${production}`,
    ].join('\n'));
    if (facts.build) {
      stages.push([
        comment('The build: every dependency (dev ones too), then the source, then the build script.'),
        `FROM ${from} AS build`,
        'WORKDIR /app',
        copyManifest,
        `RUN ${all}`,
        'COPY . .',
        'RUN npm run build',
        ...siteLines(facts.output),
        comment('The dev dependencies stay here: the image takes node_modules from the deps stage.'),
        'RUN rm -rf node_modules',
      ].join('\n'));
      appLines = ['COPY --from=build /app ./'];
    } else {
      appLines = [comment('The source (it has no build script).'), 'COPY . .'];
    }
  } else if (install.kind === 'vendored') {
    stages.push([
      comment('The dependencies come with the source (node_modules/): copied in their own layer, so', 'a change to the source alone reuses it. Nothing is downloaded.'),
      `FROM ${image} AS deps`,
      'WORKDIR /app',
      'COPY node_modules ./node_modules',
    ].join('\n'));
    if (facts.build) {
      stages.push([
        comment('The build, on the vendored dependencies.'),
        'FROM deps AS build',
        ...copySourceWithoutModules(facts, dockerfilePath),
        'RUN npm run build',
        ...siteLines(facts.output),
        comment('node_modules comes from the deps stage, in its own layer.'),
        'RUN rm -rf node_modules',
      ].join('\n'));
      appLines = ['COPY --from=build /app ./'];
    } else {
      appLines = copySourceWithoutModules(facts, dockerfilePath);
    }
  } else if (facts.build) {
    stages.push([
      comment('package.json lists no dependencies: nothing to install. The source, then its build script.'),
      `FROM ${image} AS build`,
      'WORKDIR /app',
      'COPY . .',
      'RUN npm run build',
      ...siteLines(facts.output),
    ].join('\n'));
    appLines = ['COPY --from=build /app ./'];
  } else {
    // Stages even here (contract §24: "builds in stages"), as for an empty requirements.txt or a static site.
    stages.push([
      comment('package.json lists no dependencies and no build: nothing to install. The source, as it is.'),
      `FROM ${image} AS source`,
      'WORKDIR /app',
      'COPY . .',
    ].join('\n'));
    appLines = ['COPY --from=source /app ./'];
  }
  stages.push(finalStage(facts, image, images, appLines));
  return stages.join('\n\n');
}

/** Where the build stage leaves a site whose directory is known only once the build has run. */
const BUILT_SITE = '/srv/www';

/**
 * After the build, for a build script with no known output directory: dist/ (else build/) moved to
 * BUILT_SITE, or the build fails naming both. Decided here because only the build knows what it writes.
 */
function siteLines(output: NodeOutput): string[] {
  if (output.kind !== 'static' || output.dir !== 'dist-or-build') return [];
  return [
    comment('The site is what the build wrote: dist/, else build/.'),
    [
      'RUN mkdir -p /srv \\',
      `    && if [ -d dist ]; then mv dist ${BUILT_SITE}; \\`,
      `    elif [ -d build ]; then mv build ${BUILT_SITE}; \\`,
      `    else echo 'npm run build made neither dist/ nor build/: write the site to one of them, or add a "start" script or "main" to run a server' >&2; exit 1; fi`,
    ].join('\n'),
  ];
}

function finalStage(facts: NodeFacts, image: string, images: BaseImages, appLines: string[]): string {
  const { install, output } = facts;
  if (output.kind === 'static') {
    const known = output.dir === 'dist-or-build' ? undefined : output.dir;
    return [
      comment(`The build's output (${known === undefined ? 'dist/ or build/' : `${known}/`}) is a static site: served by busybox httpd, with no Node at run time.`),
      `FROM ${images.static}`,
      `COPY --from=build ${known === undefined ? BUILT_SITE : `/app/${known}`} /srv/www`,
      comment('Run as nobody: the site is read, never written.'),
      'USER 65534:65534',
      ...portLines(),
      execForm('CMD', ['sh', '-c', 'exec httpd -f -v -p "$PORT" -h /srv/www']),
    ].join('\n');
  }
  if (output.kind === 'next-standalone') {
    return [
      comment("Next.js's standalone output carries the few node_modules it needs: the image is small."),
      `FROM ${image}`,
      'WORKDIR /app',
      'ENV NODE_ENV=production HOSTNAME=0.0.0.0',
      ...(output.publicDir ? ['COPY --from=build /app/public ./public'] : []),
      'COPY --from=build /app/.next/standalone ./',
      'COPY --from=build /app/.next/static ./.next/static',
      comment("Run as the image's unprivileged node user."),
      'USER node',
      ...portLines(),
      execForm('CMD', ['node', 'server.js']),
    ].join('\n');
  }
  return [
    comment('The image that runs: production dependencies, then the app.'),
    `FROM ${image}`,
    'WORKDIR /app',
    'ENV NODE_ENV=production',
    ...(install.kind === 'none' ? [] : ['COPY --from=deps /app/node_modules ./node_modules']),
    ...appLines,
    comment("Run as the image's unprivileged node user; the app's files stay owned by root, read-only to it."),
    'USER node',
    ...portLines(),
    execForm('CMD', output.command),
  ].join('\n');
}
