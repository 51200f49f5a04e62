// The Dockerfile of a Python app: a virtual environment built from the dependency list alone, then the source.
import { comment, execForm, portLines, safePath } from './dockerfile-text.js';
import type { BaseImages, PythonFacts } from './stack-types.js';

/** The Dockerfile body (after the header) for a Python app. */
export function pythonDockerfile(facts: PythonFacts, images: BaseImages): string {
  const image = images.python;
  const { install, command } = facts;
  const stages: string[] = [];
  const server = (command.kind === 'gunicorn' || command.kind === 'uvicorn') && command.addServer ? [command.kind] : [];

  if (install.kind === 'uv' || install.kind === 'poetry') {
    const tool = install.kind;
    stages.push([
      comment(`${tool} turns its lockfile into a requirements list here; ${tool} itself stays out of the image.`),
      `FROM ${image} AS lock`,
      'WORKDIR /app',
      `RUN pip install --no-cache-dir ${tool === 'uv' ? 'uv' : 'poetry poetry-plugin-export'}`,
      `COPY pyproject.toml ${tool === 'uv' ? 'uv.lock' : 'poetry.lock'} ./`,
      tool === 'uv'
        ? 'RUN uv export --frozen --no-dev --no-emit-project --output-file requirements.txt'
        : 'RUN poetry export --only main --output requirements.txt',
    ].join('\n'));
  }

  const deps: string[] = [
    comment('The dependencies, in a virtual environment made from the dependency list alone: this', 'layer is reused until the list changes, however often the source does.'),
    `FROM ${image} AS deps`,
    'ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1',
    'WORKDIR /app',
  ];
  if (install.kind === 'none' && server.length === 0) {
    deps.push(comment('Nothing to install: the environment stays empty.'), 'RUN python -m venv --without-pip /opt/venv');
  } else {
    deps.push('RUN python -m venv /opt/venv', 'ENV PATH=/opt/venv/bin:$PATH');
    if (install.kind === 'requirements') {
      deps.push(`COPY ${safePath(install.file, 'the requirements file')} ./`);
      for (const dir of install.paths) deps.push(`COPY ${safePath(dir, 'a local path in requirements.txt')} ./${dir}`);
      deps.push(`RUN pip install -r ${install.file}${server.map((s) => ` ${s}`).join('')}`);
    } else if (install.kind === 'uv' || install.kind === 'poetry') {
      deps.push('COPY --from=lock /app/requirements.txt ./', `RUN pip install -r requirements.txt${server.map((s) => ` ${s}`).join('')}`);
    } else {
      const packages = [...(install.kind === 'pyproject' ? install.packages : []), ...server];
      deps.push(execForm('RUN', ['pip', 'install', ...packages]));
    }
  }
  stages.push(deps.join('\n'));

  stages.push([
    comment('The image that runs: the environment, then the source.'),
    `FROM ${image}`,
    'ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PATH=/opt/venv/bin:$PATH',
    'WORKDIR /app',
    'COPY --from=deps /opt/venv /opt/venv',
    'COPY . .',
    comment('Run as an unprivileged user (no name needed); the files stay owned by root, read-only to it.'),
    'USER 10001:10001',
    ...portLines(),
    ...commandLines(command),
  ].join('\n'));
  return stages.join('\n\n');
}

function commandLines(command: PythonFacts['command']): string[] {
  switch (command.kind) {
    case 'procfile': {
      // A single command is exec'd so it receives the stop signal itself; a shell pipeline runs as written.
      const simple = !/[;&|<>`]|\$\(/.test(command.line);
      return [comment("The Procfile's web: line, through a shell so $PORT is expanded."), execForm('CMD', ['sh', '-c', simple ? `exec ${command.line}` : command.line])];
    }
    case 'gunicorn':
      return [comment('gunicorn binds 0.0.0.0:$PORT by itself when PORT is set.'), execForm('CMD', ['gunicorn', '--access-logfile', '-', command.target])];
    case 'uvicorn':
      return [comment('uvicorn on every address, at $PORT.'), execForm('CMD', ['sh', '-c', `exec uvicorn ${command.target} --host 0.0.0.0 --port "$PORT"`])];
    case 'script':
      return [comment('The app reads PORT itself.'), execForm('CMD', ['python', command.file])];
  }
}
