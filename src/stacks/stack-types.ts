// The facts a stack detector finds in a source, and why: what the Dockerfile template is made from.

/** The base images generated Dockerfiles build on (decisions §24, `SLIPWAY_BASE_IMAGE_*`). */
export interface BaseImages {
  readonly node: string;
  readonly python: string;
  /** The Go build stage. */
  readonly go: string;
  /** Where a compiled binary runs (Go's final stage). */
  readonly run: string;
  /** Serves a static site (busybox httpd). */
  readonly static: string;
}

/** The defaults of decisions §24. */
export const DEFAULT_BASE_IMAGES: BaseImages = {
  node: 'node:20-bookworm-slim',
  python: 'python:3.11-slim-bookworm',
  go: 'golang:1.22-bookworm',
  run: 'debian:bookworm-slim',
  static: 'busybox:1.36',
};

export type StackName = 'node' | 'python' | 'go' | 'static';

export type NodePackageManager = 'npm' | 'yarn' | 'pnpm';

/** How a Node app's dependencies reach the image. */
export type NodeInstall =
  /** package.json lists none: nothing to install (and nothing to download). */
  | { readonly kind: 'none' }
  /** node_modules is part of the source: used as it is. */
  | { readonly kind: 'vendored' }
  | { readonly kind: 'manager'; readonly manager: NodePackageManager; readonly lockfile: string | undefined; readonly corepack: boolean; readonly yarnBerry: boolean };

/** What a Node image runs. */
export type NodeOutput =
  | { readonly kind: 'server'; readonly command: readonly string[] }
  /** Next.js `output: 'standalone'`: .next/standalone's server.js, with .next/static and public/. */
  | { readonly kind: 'next-standalone'; readonly publicDir: boolean }
  /**
   * A build's output directory served by the static image: Vite's dist/, Create React App's build/,
   * or for another build script whichever of dist/ and build/ it made (dist/ first), known only once it has run.
   */
  | { readonly kind: 'static'; readonly dir: 'dist' | 'build' | 'dist-or-build' };

export interface NodeFacts {
  readonly stack: 'node';
  readonly install: NodeInstall;
  /** The other files the install reads (.npmrc, .yarnrc.yml…), copied with package.json and the lockfile. */
  readonly installFiles: readonly string[];
  /** The major version engines.node asks for, when it pins one. */
  readonly nodeMajor: string | undefined;
  /** The `build` script runs. */
  readonly build: boolean;
  /** The root's files and directories besides node_modules/ (copied one by one when node_modules is vendored). */
  readonly rootFiles: readonly string[];
  readonly rootDirs: readonly string[];
  readonly output: NodeOutput;
}

/** How a Python app's dependencies reach the image. */
export type PythonInstall =
  | { readonly kind: 'none' }
  /** `pip install -r <file>`; `paths` are local directories it reads (`--find-links`, `-e ./pkg`), copied with it. */
  | { readonly kind: 'requirements'; readonly file: string; readonly paths: readonly string[] }
  /** pyproject.toml's [project] dependencies, installed as listed. */
  | { readonly kind: 'pyproject'; readonly packages: readonly string[] }
  /** A lockfile exported to requirements by its tool in a throwaway stage. */
  | { readonly kind: 'uv' }
  | { readonly kind: 'poetry' };

/** What a Python image runs. */
export type PythonCommand =
  | { readonly kind: 'procfile'; readonly line: string }
  | { readonly kind: 'gunicorn'; readonly target: string; readonly addServer: boolean }
  | { readonly kind: 'uvicorn'; readonly target: string; readonly addServer: boolean }
  | { readonly kind: 'script'; readonly file: string };

export interface PythonFacts {
  readonly stack: 'python';
  readonly install: PythonInstall;
  readonly command: PythonCommand;
}

export interface GoFacts {
  readonly stack: 'go';
  /** The package built: `.` or `./cmd/<name>`. */
  readonly target: string;
  /** The binary's name. */
  readonly binary: string;
  /** The Go version go.mod names (`1.22`), if any. */
  readonly goVersion: string | undefined;
  /** Modules to download first (go.sum lists some, no vendor/). */
  readonly download: boolean;
  readonly vendored: boolean;
}

export interface StaticFacts {
  readonly stack: 'static';
  /** The directory served ('' for the root). */
  readonly dir: string;
}

export type StackFacts = NodeFacts | PythonFacts | GoFacts | StaticFacts;

/** A detector's answer: the facts, and why (the files and fields it read), in the words the build log shows. */
export interface Detection {
  readonly facts: StackFacts;
  readonly reasons: readonly string[];
}

/**
 * A source a detector recognises but cannot build as it is (bad JSON, no start command…). The
 * message names the file and what to change; it is shown in the build log and by `slipway dockerfile`.
 */
export class StackError extends Error {
  override readonly name = 'StackError';
}

/**
 * Files a detector recognises that hold no app (a package.json for tooling alone: no start, main or
 * build). It yields to any other stack, a static site included; its message is the answer only when
 * nothing else is there or SLIPWAY_STACK asks for it. `reason` is the build log's line when another is chosen.
 */
export class NotAnAppError extends StackError {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}
