#!/bin/sh
# Entrypoint of slipway-stand-in/postgres:15 (scripts/stand-in-images.mjs): the official postgres
# image's contract, written for Debian's postgresql-15. On an empty $PGDATA: initdb as
# $POSTGRES_USER with $POSTGRES_PASSWORD, database $POSTGRES_DB, scram-sha-256 for host
# connections and trust on the local socket, listening on every interface; then postgres runs as
# PID 1 (user postgres), so `docker stop` reaches it directly.
set -eu

# `docker run IMAGE -c key=value`: flags go to postgres.
if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
	set -- postgres "$@"
fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
	# Root only prepares the directories, then the same script runs again as postgres.
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	chmod 3777 /var/run/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$0" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
	: "${POSTGRES_USER:=postgres}"
	: "${POSTGRES_DB:=$POSTGRES_USER}"
	: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
		echo 'error: the database is uninitialized and POSTGRES_PASSWORD is not set.' >&2
		echo '       Set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust to allow every connection without one).' >&2
		exit 1
	fi
	pwfile=$(mktemp)
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of flags, as in the official image.
	initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --pgdata="$PGDATA" \
		--auth-local=trust --auth-host="$POSTGRES_HOST_AUTH_METHOD" ${POSTGRES_INITDB_ARGS:-}
	rm -f "$pwfile"
	printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"
	printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

	# A server on the socket only, to create the database and run the init scripts.
	pg_ctl --pgdata="$PGDATA" --wait --silent -o "-c listen_addresses=''" start
	export PGUSER="$POSTGRES_USER" PGPASSWORD="${POSTGRES_PASSWORD:-}"
	if [ "$POSTGRES_DB" != postgres ]; then
		# Read from stdin, where psql interpolates :"db" as a quoted identifier.
		echo 'CREATE DATABASE :"db";' | psql --no-psqlrc --quiet -v ON_ERROR_STOP=1 --dbname=postgres --set db="$POSTGRES_DB"
	fi
	for file in /docker-entrypoint-initdb.d/*; do
		[ -f "$file" ] || continue
		case "$file" in
		*.sh) echo "running $file"; . "$file" ;;
		*.sql) echo "running $file"; psql --no-psqlrc -v ON_ERROR_STOP=1 --dbname="$POSTGRES_DB" --file="$file" ;;
		*.sql.gz) echo "running $file"; gunzip -c "$file" | psql --no-psqlrc -v ON_ERROR_STOP=1 --dbname="$POSTGRES_DB" ;;
		*) echo "ignoring $file" ;;
		esac
	done
	unset PGPASSWORD
	pg_ctl --pgdata="$PGDATA" --mode=fast --wait --silent stop
	echo 'PostgreSQL init process complete; ready for start up.'
fi

exec "$@"
