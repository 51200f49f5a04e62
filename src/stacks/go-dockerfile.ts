// The Dockerfile of a Go app: modules downloaded in their own layer, a static binary on the small run image.
import { comment, execForm, portLines, safePath } from './dockerfile-text.js';
import { DEFAULT_BASE_IMAGES, type BaseImages, type GoFacts } from './stack-types.js';

/** The Go build image: the configured one, or the default's family at go.mod's version (1.21 and later name their toolchain). */
export function goImage(facts: GoFacts, images: BaseImages): string {
  if (facts.goVersion === undefined || images.go !== DEFAULT_BASE_IMAGES.go) return images.go;
  const [major, minor] = facts.goVersion.split('.').map(Number);
  return major === 1 && (minor ?? 0) >= 21 ? `golang:${facts.goVersion}-bookworm` : images.go;
}

/** The Dockerfile body (after the header) for a Go app. */
export function goDockerfile(facts: GoFacts, images: BaseImages): string {
  const binary = safePath(facts.binary, 'the command name');
  const target = safePath(facts.target, 'the package path');
  const modules: string[] = facts.download
    ? [comment('Modules first, from go.mod and go.sum alone: reused until they change.'), 'COPY go.mod go.sum ./', 'RUN go mod download']
    : [comment(facts.vendored ? 'Modules are vendored (vendor/): nothing to download.' : 'go.mod requires no modules: nothing to download.')];
  return [
    [
      comment('The build: a static binary (no cgo), so the run image needs no Go and no C library.'),
      `FROM ${goImage(facts, images)} AS build`,
      'WORKDIR /src',
      'ENV CGO_ENABLED=0',
      ...modules,
      'COPY . .',
      `RUN go build -ldflags="-s -w" -o /out/${binary} ${target}`,
    ].join('\n'),
    [
      comment('The image that runs: the binary alone.'),
      `FROM ${images.run}`,
      `COPY --from=build /out/${binary} /usr/local/bin/${binary}`,
      comment('Run as an unprivileged user (no name needed).'),
      'USER 10001:10001',
      ...portLines(),
      execForm('CMD', [binary]),
    ].join('\n'),
  ].join('\n\n');
}
