// Unit tests of the compose room: sample stacks modelled on public ones planned as contract §21 says, and every refusal named.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadCompose, sourceAt, type ComposePlan, type ComposeSource } from '../../src/compose/load-compose.js';
import { sourcePathProblem } from '../../src/compose/compose-paths.js';
import { splitCommand, readDuration } from '../../src/compose/compose-values.js';
import { startOrder } from '../../src/compose/compose-order.js';
import { DomainError } from '../../src/core/errors.js';
import * as stacks from './sample-stacks.js';

/** A source held in memory: the compose file at `docker-compose.yml` and the stack's other files. */
function memorySource(stack: stacks.SampleStack): ComposeSource {
  const files: Record<string, string> = { 'docker-compose.yml': stack.compose, ...stack.files };
  return {
    // No such root on disk: the checks judge the text of the path alone.
    pathProblem: (rel) => sourcePathProblem('/nonexistent/slipway-compose-test', rel),
    readSource: (rel) => files[rel],
  };
}

const plan = (stack: stacks.SampleStack, values = new Map<string, string>()): ComposePlan => loadCompose(memorySource(stack), 'docker-compose.yml', values);

/** The build failure a stack ends in (its message). */
function refusal(stack: stacks.SampleStack): string {
  try {
    plan(stack);
  } catch (err) {
    assert.ok(err instanceof DomainError, String(err));
    assert.equal(err.code, 'build_failed');
    return err.message;
  }
  assert.fail('the stack was accepted');
}

const service = (p: ComposePlan, name: string) => {
  const found = p.services.find((s) => s.name === name);
  assert.ok(found, `service ${name} in the plan`);
  return found;
};

describe('sample stacks', () => {
  test('voting app: builds three, orders by depends_on, keeps health checks, ignores networks', () => {
    const p = plan(stacks.votingApp);
    assert.equal(p.web, 'vote');
    assert.equal(p.port, 80);
    const order = p.services.map((s) => s.name);
    for (const [before, after] of [['redis', 'vote'], ['db', 'result'], ['redis', 'worker'], ['db', 'worker']] as const) {
      assert.ok(order.indexOf(before) < order.indexOf(after), `${before} before ${after} in ${order.join(',')}`);
    }
    assert.deepEqual(service(p, 'vote').source, { kind: 'build', context: 'vote', dockerfile: 'Dockerfile', args: {}, target: undefined });
    assert.deepEqual(service(p, 'redis').source, { kind: 'image', image: 'redis:alpine' });
    assert.deepEqual(service(p, 'vote').healthcheck, { test: ['CMD', 'curl', '-f', 'http://localhost'], intervalMs: 15_000, timeoutMs: 5000, retries: 3, startPeriodMs: 10_000 });
    assert.deepEqual(service(p, 'redis').healthcheck?.test, ['CMD-SHELL', '/healthchecks/redis.sh']);
    assert.deepEqual(service(p, 'worker').dependsOn, [{ service: 'redis', condition: 'service_healthy' }, { service: 'db', condition: 'service_healthy' }]);
    assert.deepEqual(service(p, 'result').entrypoint, ['nodemon', '--inspect=0.0.0.0', 'server.js']);
    assert.deepEqual(service(p, 'db').volumes, [{ name: 'db-data', target: '/var/lib/postgresql/data', readOnly: false }]);
    // One warning per service and key, and the top-level networks.
    for (const name of ['vote', 'result', 'worker', 'redis', 'db']) {
      assert.equal(p.warnings.filter((w) => w.includes(`service "${name}": "networks" is ignored`)).length, 1, p.warnings.join('\n'));
    }
    assert.ok(p.warnings.some((w) => /^warning: top-level "networks" is ignored \(line \d+\)$/.test(w)), p.warnings.join('\n'));
  });

  test('wordpress quickstart as published: 8000:80 serves container port 80, the host port left out with a warning', () => {
    const p = plan(stacks.wordpress);
    assert.equal(p.web, 'wordpress');
    assert.equal(p.port, 80);
    assert.ok(p.warnings.includes('warning: service "wordpress": "ports" "8000:80": the host port is not published (nothing is, on any host); the container port is used (line 17)'), p.warnings.join('\n'));
  });

  test('wordpress with the container port: web found by its port, restart and container_name handled', () => {
    const p = plan(stacks.wordpressForSlipway);
    assert.equal(p.web, 'wordpress');
    assert.equal(p.port, 80);
    assert.deepEqual(p.services.map((s) => s.name), ['db', 'wordpress']);
    assert.deepEqual(service(p, 'db').command, ['--default-authentication-plugin=mysql_native_password']);
    assert.deepEqual(service(p, 'db').environment, { MYSQL_DATABASE: 'wordpress', MYSQL_ROOT_PASSWORD: 'somewordpress' });
    assert.deepEqual(p.warnings, ['warning: service "db": "container_name" is ignored (line 5)']);
  });

  test('django + celery: env_file then environment, quoted command split without a shell, replicas, profiled beat not started', () => {
    const p = plan(stacks.djangoCelery);
    assert.equal(p.web, 'web');
    assert.equal(p.port, 8000);
    assert.deepEqual(service(p, 'web').command, ['gunicorn', 'project.wsgi:application', '--bind', '0.0.0.0:8000', '--workers', '2']);
    assert.deepEqual(service(p, 'web').environment, { DEBUG: '0', SECRET_KEY: 'not-a-secret', ALLOWED_HOSTS: 'example.com', DJANGO_SETTINGS_MODULE: 'project.settings' });
    assert.equal(service(p, 'celery').replicas, 2);
    assert.ok(!p.services.some((s) => s.name === 'beat'));
    assert.ok(p.warnings.includes('warning: top-level "version" is ignored (line 2)'));
    assert.ok(p.warnings.some((w) => w.startsWith('warning: service "beat": "profiles" is ignored: the service is not started')));
  });

  test('nextcloud: a host bind mount and a docker socket are refused at once; its published port is not a problem', () => {
    const message = refusal(stacks.nextcloud);
    assert.match(message, /2 problems/);
    assert.doesNotMatch(message, /key ports/);
    assert.match(message, /service "app", key volumes \(line \d+\): "\.\/config:\/var\/www\/html\/config" mounts a host path/);
    assert.match(message, /service "cron", key volumes \(line \d+\): "\/var\/run\/docker\.sock:\/var\/run\/docker\.sock:ro" mounts a host path or socket/);
  });

  test('gitea: the host path is named; its two published ports are not problems', () => {
    const message = refusal(stacks.gitea);
    assert.doesNotMatch(message, /key ports/);
    assert.match(message, /"\/etc\/timezone:\/etc\/timezone:ro" mounts a host path/);
  });

  test('ghost: x-slipway names the web service and its port', () => {
    const p = plan(stacks.ghost);
    assert.equal(p.web, 'ghost');
    assert.equal(p.port, 2368);
    assert.deepEqual(service(p, 'db').ports, [3306]);
  });

  test('anchors, merge keys and x- fields: shared build and environment, overrides kept, x- keys silent', () => {
    const p = plan(stacks.anchors);
    assert.equal(p.web, 'web');
    assert.equal(p.port, 3000);
    const build = { kind: 'build', context: '.', dockerfile: 'docker/Dockerfile', args: { NODE_ENV: 'production' }, target: 'runtime' };
    assert.deepEqual(service(p, 'web').source, build);
    assert.deepEqual(service(p, 'jobs').source, build);
    assert.deepEqual(service(p, 'jobs').environment, { REDIS_URL: 'redis://cache:6379', LOG_LEVEL: 'debug' });
    assert.deepEqual(service(p, 'web').environment, { REDIS_URL: 'redis://cache:6379', LOG_LEVEL: 'info' });
    assert.ok(!p.warnings.some((w) => w.includes('x-')), p.warnings.join('\n'));
    assert.equal(p.warnings.filter((w) => w.includes('"logging" is ignored')).length, 2);
  });

  test('profiles: services with profiles are not started, and nothing depends on them', () => {
    const p = plan(stacks.profiles);
    assert.deepEqual(p.services.map((s) => s.name), ['web']);
    assert.equal(p.web, 'web');
    assert.equal(p.port, null);
    assert.equal(p.warnings.filter((w) => w.includes('"profiles" is ignored')).length, 2);
  });

  test('every privilege is refused at once, named with its service and key', () => {
    const message = refusal(stacks.privileged);
    for (const [svc, key] of [['web', 'privileged'], ['web', 'network_mode'], ['agent', 'cap_add'], ['agent', 'devices'], ['agent', 'pid'], ['agent', 'volumes']]) {
      assert.match(message, new RegExp(`service "${svc}", key ${key} \\(line \\d+\\)`), message);
    }
    assert.match(message, /"\/:\/host" mounts a host path/);
    // Its published port is not among them (§21: the container port is used, the host part left out).
    assert.match(message, /7 problems/);
  });

  test('external volume refused; labels and hostname ignored with a warning each', () => {
    const message = refusal(stacks.externals);
    assert.match(message, /top-level key volumes\.certs \(line \d+\): an external volume is refused/);
    const ok = plan({ compose: stacks.externals.compose.replace('external: true', '{}').replace('certs:\n    {}', 'certs: {}') });
    assert.deepEqual(ok.warnings.map((w) => w.replace(/ \(line \d+\)$/, '')), ['warning: service "web": "labels" is ignored', 'warning: service "web": "hostname" is ignored']);
  });

  test('secrets and configs: files of the source mounted at their targets', () => {
    const p = plan(stacks.secretsAndConfigs);
    assert.deepEqual(service(p, 'web').files, [
      { source: 'secrets/admin.txt', target: '/run/secrets/admin_password' },
      { source: 'grafana/ds.yaml', target: '/etc/grafana/provisioning/datasources/ds.yaml' },
    ]);
    assert.deepEqual(service(p, 'prometheus').files, [{ source: 'prometheus.yml', target: '/prometheus_yml' }]);
    const outside = refusal({ ...stacks.secretsAndConfigs, compose: stacks.secretsAndConfigs.compose.replace('./secrets/admin.txt', '../../etc/shadow') });
    assert.match(outside, /top-level key secrets\.admin_password \(line \d+\): the file "\.\.\/\.\.\/etc\/shadow" is outside the source/);
  });

  test('nginx-flask-mysql: two services declare ports, so the web service must be named; named, the proxy serves 80 and the secret file is mounted', () => {
    assert.match(refusal(stacks.nginxFlaskMysql), /cannot tell which service is the web service: 2 services declare ports \(db, proxy\)/);
    const p = plan({ ...stacks.nginxFlaskMysql, compose: `x-slipway: {web: proxy}\n${stacks.nginxFlaskMysql.compose}` });
    assert.equal(p.web, 'proxy');
    assert.equal(p.port, 80);
    assert.deepEqual(p.services.map((s) => s.name), ['db', 'backend', 'proxy']);
    assert.deepEqual(service(p, 'backend').source, { kind: 'build', context: 'backend', dockerfile: 'Dockerfile', args: {}, target: 'builder' });
    assert.deepEqual(service(p, 'db').files, [{ source: 'db/password.txt', target: '/run/secrets/db-password' }]);
    assert.deepEqual(service(p, 'db').ports, [3306, 33060]);
    assert.deepEqual(service(p, 'db').healthcheck?.test, ['CMD-SHELL', 'mysqladmin ping -h 127.0.0.1 --password="$(cat /run/secrets/db-password)" --silent']);
    assert.ok(p.warnings.includes('warning: service "proxy": "ports" "80:80": the host port is not published (nothing is, on any host); the container port is used (line 38)'), p.warnings.join('\n'));
  });

  test('react-express-mongodb: each source folder bind-mounted is refused, named with its service', () => {
    const message = refusal(stacks.reactExpressMongo);
    assert.match(message, /3 problems/);
    for (const [svc, mount] of [['frontend', './frontend:/usr/src/app'], ['backend', './backend:/usr/src/app'], ['mongo', './data:/data/db']] as const) {
      assert.match(message, new RegExp(`service "${svc}", key volumes \\(line \\d+\\): "${mount.replace(/\./g, '\\.')}" mounts a host path`), message);
    }
  });

  test('n8n with postgres: variables from the deployment, links ignored with a warning, the web service found by its port', () => {
    const p = plan(stacks.n8nPostgres, new Map([['POSTGRES_USER', 'n8n'], ['POSTGRES_DB', 'n8n'], ['POSTGRES_NON_ROOT_USER', 'worker']]));
    assert.equal(p.web, 'n8n');
    assert.equal(p.port, 5678);
    assert.deepEqual(service(p, 'postgres').healthcheck?.test, ['CMD-SHELL', 'pg_isready -h localhost -U n8n -d n8n']);
    // A bare name takes its value from the environment: the deployment's variables, added when the service starts.
    assert.deepEqual(service(p, 'postgres').environment, {});
    assert.equal(service(p, 'n8n').environment['DB_POSTGRESDB_USER'], 'worker');
    assert.deepEqual(service(p, 'n8n').dependsOn, [{ service: 'postgres', condition: 'service_healthy' }]);
    assert.ok(p.warnings.some((w) => /^warning: service "n8n": "links" is ignored/.test(w)), p.warnings.join('\n'));
  });

  test('a depends_on cycle is named in order', () => {
    assert.match(refusal(stacks.cycle), /service "web", key depends_on \(line \d+\): a depends_on cycle: web → api → queue → web/);
  });
});

describe('bad input', () => {
  test('malformed YAML fails with its line and column', () => {
    assert.match(refusal({ compose: 'services:\n  web:\n    image: [a,\n  b: c\n' }), /compose file "docker-compose\.yml": not valid YAML at line \d+, column \d+/);
  });

  test('a missing compose file names its path', () => {
    assert.throws(() => loadCompose(memorySource({ compose: '' }), 'deploy/compose.yaml', new Map()), /compose file "deploy\/compose\.yaml": not found at "deploy\/compose\.yaml" in the source/);
  });

  test('no services, or not a mapping', () => {
    assert.match(refusal({ compose: 'version: "3"\n' }), /declares no services/);
    assert.match(refusal({ compose: '- a\n- b\n' }), /top level must be a mapping/);
  });

  test('a build context outside the source, a remote one and an absolute one are refused', () => {
    const message = refusal({ compose: 'services:\n  web:\n    build: ../other\n  api:\n    build: {context: "https://github.com/x/y.git"}\n  job:\n    build: /srv/app\n' });
    assert.match(message, /service "web", key build\.context \(line 3\): the build context "\.\.\/other" is outside the source/);
    assert.match(message, /service "api", key build\.context .*remote context/);
    assert.match(message, /service "job", key build\.context .*relative path/);
  });

  test('an env_file outside the source or missing is refused', () => {
    const message = refusal({ compose: 'services:\n  web:\n    image: a\n    env_file: [../../.env, missing.env]\n' });
    assert.match(message, /"\.\.\/\.\.\/\.env" is outside the source/);
    assert.match(message, /the env_file "missing\.env" is not in the source/);
  });

  test('more than 20 services', () => {
    const compose = `services:\n${Array.from({ length: 21 }, (_, i) => `  s${i}:\n    image: busybox\n`).join('')}`;
    assert.match(refusal({ compose }), /21 services declared; at most 20 are allowed/);
  });

  test('no web service determinable: the rule is in the message', () => {
    assert.match(refusal({ compose: 'services:\n  api:\n    image: a\n  worker:\n    image: b\n' }), /cannot tell which service is the web service: no service declares ports and none is named "web"; name it with "x-slipway: \{web: <service>, port: <n>\}"/);
    assert.match(refusal({ compose: 'services:\n  api:\n    image: a\n    expose: [80]\n  admin:\n    image: b\n    expose: [81]\n' }), /2 services declare ports \(api, admin\)/);
  });

  test('unknown depends_on, undeclared volume, service without image or build', () => {
    const message = refusal({ compose: 'services:\n  web:\n    image: a\n    depends_on: [ghost]\n    volumes: ["data:/data"]\n  job:\n    command: x\n' });
    assert.match(message, /"depends_on" names "ghost", which is not a service of the file/);
    assert.match(message, /the volume "data" is not declared/);
    assert.match(message, /service "job" needs "image" or "build"/);
  });

  test('interpolation from the values given, with defaults; $$ is a dollar', () => {
    const p = plan({ compose: 'services:\n  web:\n    image: "app:${TAG:-latest}"\n    command: ["echo", "$$HOME", "${GREETING}"]\n' }, new Map([['GREETING', 'hi']]));
    assert.deepEqual(p.services[0]?.source, { kind: 'image', image: 'app:latest' });
    assert.deepEqual(p.services[0]?.command, ['echo', '$HOME', 'hi']);
  });
});

describe('paths on disk', () => {
  test('a symlink out of the source is refused; one inside is fine', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-compose-'));
    try {
      fs.mkdirSync(path.join(root, 'app'));
      fs.writeFileSync(path.join(root, 'app', 'Dockerfile'), 'FROM scratch\n');
      fs.symlinkSync('/etc', path.join(root, 'escape'));
      fs.symlinkSync('app', path.join(root, 'inside'));
      fs.writeFileSync(path.join(root, 'docker-compose.yml'), 'services:\n  web:\n    build: escape\n');
      assert.match(sourcePathProblem(root, 'escape') ?? '', /symbolic link leads out/);
      assert.match(sourcePathProblem(root, 'escape/passwd') ?? '', /symbolic link leads out/);
      assert.equal(sourcePathProblem(root, 'inside'), undefined);
      assert.throws(() => loadCompose(sourceAt(root), 'docker-compose.yml', new Map()), /build context "escape" is outside the source \(a symbolic link/);
      fs.symlinkSync('/etc/hostname', path.join(root, 'linked.yml'));
      assert.throws(() => loadCompose(sourceAt(root), 'linked.yml', new Map()), /the path is outside the source/);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('values', () => {
  test('commands split like compose, durations read', () => {
    assert.deepEqual(splitCommand(`sh -c 'echo "a b" && sleep 1'`), ['sh', '-c', 'echo "a b" && sleep 1']);
    assert.deepEqual(splitCommand('a\\ b "" c'), ['a b', '', 'c']);
    assert.equal(readDuration('1m30s'), 90_000);
    assert.equal(readDuration('500ms'), 500);
    assert.equal(readDuration('soon'), undefined);
  });

  test('start order keeps file order where free', () => {
    assert.deepEqual(startOrder([{ name: 'a', dependsOn: [] }, { name: 'b', dependsOn: [{ service: 'c' }] }, { name: 'c', dependsOn: [] }]), { order: ['a', 'c', 'b'] });
  });
});
