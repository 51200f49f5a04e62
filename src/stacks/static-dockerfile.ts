// The Dockerfile of a static site: its files served by busybox httpd.
import { comment, execForm, portLines, safePath } from './dockerfile-text.js';
import type { BaseImages, StaticFacts } from './stack-types.js';

/** The Dockerfile body (after the header) for a static site; `dockerfilePath` is where this file sits in the context. */
export function staticDockerfile(facts: StaticFacts, images: BaseImages, dockerfilePath: string): string {
  const dir = facts.dir === '' ? '.' : safePath(facts.dir, 'the site directory');
  const leftovers = facts.dir === '' ? [safePath(dockerfilePath, 'the Dockerfile path'), '.dockerignore'] : [];
  return [
    [
      comment('The site, without the build files (this Dockerfile is not served).'),
      `FROM ${images.static} AS site`,
      `COPY ${dir} /srv/www`,
      ...(leftovers.length === 0 ? [] : [`RUN rm -f ${leftovers.map((f) => `/srv/www/${f}`).join(' ')}`]),
    ].join('\n'),
    [
      comment('The image that serves it: busybox httpd, as nobody (the site is read, never written).'),
      `FROM ${images.static}`,
      'COPY --from=site /srv/www /srv/www',
      'USER 65534:65534',
      ...portLines(),
      execForm('CMD', ['sh', '-c', 'exec httpd -f -v -p "$PORT" -h /srv/www']),
    ].join('\n'),
  ].join('\n\n');
}
