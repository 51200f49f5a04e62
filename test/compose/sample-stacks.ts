// Compose files shaped like well-known public sample stacks (written for these tests), each with the files of its source.

export interface SampleStack {
  readonly compose: string;
  /** Other files of the source (path → content). */
  readonly files?: Readonly<Record<string, string>>;
}

/** Docker's voting app: two built services, redis, postgres, and networks/ports that Slipway ignores or refuses. */
export const votingApp: SampleStack = {
  compose: `
services:
  vote:
    build: ./vote
    depends_on:
      redis:
        condition: service_healthy
    healthcheck:
      test: ["CMD", "curl", "-f", "http://localhost"]
      interval: 15s
      timeout: 5s
      retries: 3
      start_period: 10s
    expose: ["80"]
    networks: [front-tier, back-tier]
  result:
    build: ./result
    entrypoint: nodemon --inspect=0.0.0.0 server.js
    depends_on:
      db:
        condition: service_healthy
    networks: [back-tier]
  worker:
    build:
      context: ./worker
    depends_on:
      redis:
        condition: service_healthy
      db:
        condition: service_healthy
    networks: [back-tier]
  redis:
    image: redis:alpine
    healthcheck:
      test: /healthchecks/redis.sh
      interval: "5s"
    networks: [back-tier]
  db:
    image: postgres:15-alpine
    environment:
      POSTGRES_USER: "postgres"
      POSTGRES_PASSWORD: "postgres"
    volumes:
      - "db-data:/var/lib/postgresql/data"
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U postgres"]
      interval: "5s"
    networks: [back-tier]
volumes:
  db-data:
networks:
  front-tier:
  back-tier:
`,
  files: { 'vote/Dockerfile': 'FROM scratch\n', 'result/Dockerfile': 'FROM scratch\n', 'worker/Dockerfile': 'FROM scratch\n' },
};

/** The classic WordPress + MySQL quickstart (publishes 8000:80 and names its containers). */
export const wordpress: SampleStack = {
  compose: `
services:
  db:
    image: mysql:8.0
    container_name: db
    restart: unless-stopped
    command: '--default-authentication-plugin=mysql_native_password'
    environment:
      - MYSQL_DATABASE=wordpress
      - MYSQL_ROOT_PASSWORD=somewordpress
    volumes:
      - db_data:/var/lib/mysql
  wordpress:
    depends_on:
      - db
    image: wordpress:latest
    ports:
      - "8000:80"
    restart: always
    environment:
      WORDPRESS_DB_HOST: db:3306
      WORDPRESS_DB_USER: wordpress
volumes:
  db_data: {}
`,
};

/** The same stack as Slipway wants it: the container port alone. */
export const wordpressForSlipway: SampleStack = { compose: wordpress.compose.replace('"8000:80"', '"80"') };

/** Django + PostgreSQL + Redis + Celery, with an env file and a command string. */
export const djangoCelery: SampleStack = {
  compose: `
version: "3.9"
services:
  web:
    build: .
    command: gunicorn project.wsgi:application --bind 0.0.0.0:8000 --workers "2"
    env_file: .env.prod
    environment:
      - DJANGO_SETTINGS_MODULE=project.settings
    expose:
      - 8000
    depends_on:
      - db
      - redis
  celery:
    build: .
    command: celery -A project worker -l info
    env_file:
      - .env.prod
    depends_on: [db, redis]
    deploy:
      replicas: 2
  beat:
    build: .
    command: ["celery", "-A", "project", "beat", "-l", "info"]
    env_file: .env.prod
    depends_on: [redis]
    profiles: ["scheduler"]
  db:
    image: postgres:15
    volumes:
      - postgres_data:/var/lib/postgresql/data/
    environment:
      POSTGRES_DB: app
  redis:
    image: redis:7-alpine
volumes:
  postgres_data:
`,
  files: { Dockerfile: 'FROM scratch\n', '.env.prod': '# production\nDEBUG=0\nSECRET_KEY="not-a-secret"\nexport ALLOWED_HOSTS=example.com\n' },
};

/** Nextcloud with MariaDB, Redis and a cron container, host bind mounts and a docker socket. */
export const nextcloud: SampleStack = {
  compose: `
services:
  db:
    image: mariadb:10.11
    command: --transaction-isolation=READ-COMMITTED --log-bin=binlog --binlog-format=ROW
    restart: always
    volumes:
      - db:/var/lib/mysql
    environment:
      - MYSQL_ROOT_PASSWORD=
      - MARIADB_AUTO_UPGRADE=1
  redis:
    image: redis:alpine
    restart: always
  app:
    image: nextcloud:apache
    restart: always
    ports:
      - 127.0.0.1:8080:80
    volumes:
      - nextcloud:/var/www/html
      - ./config:/var/www/html/config
    depends_on: [db, redis]
  cron:
    image: nextcloud:apache
    restart: always
    volumes:
      - nextcloud:/var/www/html
      - /var/run/docker.sock:/var/run/docker.sock:ro
    entrypoint: /cron.sh
    depends_on: [db, redis]
volumes:
  db:
  nextcloud:
`,
};

/** Gitea with PostgreSQL: SSH published on the host, a host path for time zone files. */
export const gitea: SampleStack = {
  compose: `
version: "3"
networks:
  gitea:
    external: false
services:
  server:
    image: gitea/gitea:1.21
    container_name: gitea
    environment:
      - USER_UID=1000
      - GITEA__database__DB_TYPE=postgres
      - GITEA__database__HOST=db:5432
    restart: always
    networks: [gitea]
    volumes:
      - gitea:/data
      - /etc/timezone:/etc/timezone:ro
    ports:
      - "3000:3000"
      - "222:22"
    depends_on:
      - db
  db:
    image: postgres:14
    restart: always
    environment:
      - POSTGRES_USER=gitea
    networks: [gitea]
    volumes:
      - pgdata:/var/lib/postgresql/data
volumes:
  gitea:
  pgdata:
`,
};

/** Ghost with MySQL as Slipway accepts it: ports written as container ports, the web named by x-slipway. */
export const ghost: SampleStack = {
  compose: `
x-slipway:
  web: ghost
  port: 2368
services:
  ghost:
    image: ghost:5-alpine
    restart: always
    ports: ["2368"]
    environment:
      database__client: mysql
      database__connection__host: db
      url: http://localhost:8080
    volumes:
      - ghost:/var/lib/ghost/content
  db:
    image: mysql:8.0
    restart: always
    expose: ["3306"]
    environment:
      MYSQL_ROOT_PASSWORD: example
volumes:
  ghost:
`,
};

/** A stack written with anchors, merge keys and x- fields (a common way to share settings). */
export const anchors: SampleStack = {
  compose: `
x-common: &common
  build:
    context: .
    dockerfile: docker/Dockerfile
    args:
      NODE_ENV: production
    target: runtime
  restart: unless-stopped
  environment: &env
    REDIS_URL: redis://cache:6379
    LOG_LEVEL: info
  logging:
    driver: json-file

services:
  web:
    <<: *common
    command: ["node", "server.js"]
    expose: [3000]
    x-notes: served
  jobs:
    <<: *common
    command: ["node", "jobs.js"]
    environment:
      <<: *env
      LOG_LEVEL: debug
  cache:
    image: redis:7
`,
  files: { 'docker/Dockerfile': 'FROM scratch\n' },
};

/** A stack with profiles: the debug tools are not started. */
export const profiles: SampleStack = {
  compose: `
services:
  web:
    image: nginx:alpine
  adminer:
    image: adminer
    profiles: [debug]
    depends_on: [web]
  mailhog:
    image: mailhog/mailhog
    profiles: ["debug"]
`,
};

/** An app whose compose file asks for the host's privileges in several ways at once. */
export const privileged: SampleStack = {
  compose: `
services:
  web:
    image: busybox
    privileged: true
    network_mode: host
    ports: ["8080:80"]
  agent:
    image: portainer/agent
    cap_add: [SYS_ADMIN]
    devices: ["/dev/fuse:/dev/fuse"]
    pid: host
    volumes:
      - /var/run/docker.sock:/var/run/docker.sock
      - type: bind
        source: /
        target: /host
`,
};

/** Plausible (traefik-like) but using an external network and an external volume. */
export const externals: SampleStack = {
  compose: `
services:
  web:
    image: traefik/whoami
    labels:
      - "traefik.enable=true"
    volumes: [certs:/certs]
    hostname: whoami
volumes:
  certs:
    external: true
`,
};

/** A monitoring stack with secrets and configs files of the source. */
export const secretsAndConfigs: SampleStack = {
  compose: `
services:
  web:
    image: grafana/grafana
    expose: ["3000"]
    secrets: [admin_password]
    configs:
      - source: datasources
        target: /etc/grafana/provisioning/datasources/ds.yaml
  prometheus:
    image: prom/prometheus
    configs: [prometheus_yml]
secrets:
  admin_password:
    file: ./secrets/admin.txt
configs:
  datasources:
    file: ./grafana/ds.yaml
  prometheus_yml:
    file: prometheus.yml
`,
  files: { 'secrets/admin.txt': 'hunter2\n', 'grafana/ds.yaml': 'apiVersion: 1\n', 'prometheus.yml': 'global: {}\n' },
};

/** A stack whose services wait on each other in a circle. */
export const cycle: SampleStack = {
  compose: `
services:
  web:
    image: a
    depends_on: [api]
  api:
    image: b
    depends_on: [queue]
  queue:
    image: c
    depends_on: [web]
`,
};

/** awesome-compose's nginx-flask-mysql: a built proxy publishing 80:80, a built backend (stage builder), mariadb with a secret file and `expose`. */
export const nginxFlaskMysql: SampleStack = {
  compose: `
services:
  backend:
    build:
      context: backend
      target: builder
    restart: always
    secrets:
      - db-password
    depends_on:
      db:
        condition: service_healthy
  db:
    image: mariadb:10-focal
    command: '--default-authentication-plugin=mysql_native_password'
    restart: always
    healthcheck:
      test: ['CMD-SHELL', 'mysqladmin ping -h 127.0.0.1 --password="$$(cat /run/secrets/db-password)" --silent']
      interval: 3s
      retries: 5
      start_period: 30s
    secrets:
      - db-password
    volumes:
      - db-data:/var/lib/mysql
    networks:
      - backnet
    environment:
      - MYSQL_DATABASE=example
      - MYSQL_ROOT_PASSWORD_FILE=/run/secrets/db-password
    expose:
      - 3306
      - 33060
  proxy:
    build: proxy
    restart: always
    ports:
      - 80:80
    depends_on:
      - backend
    networks:
      - frontnet
volumes:
  db-data: {}
secrets:
  db-password:
    file: db/password.txt
networks:
  backnet:
  frontnet:
`,
  files: { 'backend/Dockerfile': 'FROM scratch\n', 'proxy/Dockerfile': 'FROM scratch\n', 'db/password.txt': 'not-a-secret\n' },
};

/** awesome-compose's react-express-mongodb: source folders bind-mounted for live reload, anonymous volumes, stdin_open. */
export const reactExpressMongo: SampleStack = {
  compose: `
services:
  frontend:
    build:
      context: frontend
      target: development
    ports:
      - 3000:3000
    stdin_open: true
    volumes:
      - ./frontend:/usr/src/app
      - /usr/src/app/node_modules
    restart: always
    depends_on:
      - backend
  backend:
    restart: always
    build:
      context: backend
      target: development
    volumes:
      - ./backend:/usr/src/app
      - /usr/src/app/node_modules
    depends_on:
      - mongo
    expose:
      - 3000
  mongo:
    restart: always
    image: mongo:4.2.0
    volumes:
      - ./data:/data/db
    expose:
      - 27017
`,
  files: { 'frontend/Dockerfile': 'FROM scratch\n', 'backend/Dockerfile': 'FROM scratch\n' },
};

/** n8n's postgres example: variables taken from the environment (bare names, `${…}`), `links`, an init script bind-mounted. */
export const n8nPostgres: SampleStack = {
  compose: `
version: '3.8'
volumes:
  db_storage:
  n8n_storage:
services:
  postgres:
    image: postgres:16
    restart: always
    environment:
      - POSTGRES_USER
      - POSTGRES_PASSWORD
      - POSTGRES_DB
    volumes:
      - db_storage:/var/lib/postgresql/data
    healthcheck:
      test: ['CMD-SHELL', 'pg_isready -h localhost -U \${POSTGRES_USER} -d \${POSTGRES_DB}']
      interval: 5s
      timeout: 5s
      retries: 10
  n8n:
    image: docker.n8n.io/n8nio/n8n
    restart: always
    environment:
      - DB_TYPE=postgresdb
      - DB_POSTGRESDB_HOST=postgres
      - DB_POSTGRESDB_USER=\${POSTGRES_NON_ROOT_USER}
    ports:
      - 5678:5678
    links:
      - postgres
    volumes:
      - n8n_storage:/home/node/.n8n
    depends_on:
      postgres:
        condition: service_healthy
`,
};
