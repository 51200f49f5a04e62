#!/bin/sh
# Entrypoint of slipway-stand-in/mariadb:10.11 (scripts/stand-in-images.mjs): the official mariadb
# image's contract, written for Debian's mariadb-server. On an empty /var/lib/mysql: a new data
# directory, root's password (MARIADB_ROOT_PASSWORD, or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, or
# MARIADB_RANDOM_ROOT_PASSWORD), MARIADB_DATABASE, MARIADB_USER with MARIADB_PASSWORD granted all on
# it (each MYSQL_* name works too); then mariadbd runs as PID 1 (user mysql) on 0.0.0.0:3306.
set -eu

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
	set -- mariadbd "$@"
fi
DATADIR=/var/lib/mysql
SOCKET=/run/mysqld/mysqld.sock

if { [ "$1" = mariadbd ] || [ "$1" = mysqld ]; } && [ "$(id -u)" = 0 ]; then
	mkdir -p "$DATADIR" /run/mysqld
	chown mysql:mysql "$DATADIR" /run/mysqld
	exec setpriv --reuid=mysql --regid=mysql --init-groups -- "$0" "$@"
fi

# A value in a single-quoted SQL string, and a name in backquotes.
sql_string() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g"; }
sql_name() { printf '%s' "$1" | sed -e 's/`/``/g'; }

if { [ "$1" = mariadbd ] || [ "$1" = mysqld ]; } && [ ! -d "$DATADIR/mysql" ]; then
	ROOT_PASSWORD=${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}
	ALLOW_EMPTY=${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-${MYSQL_ALLOW_EMPTY_PASSWORD:-}}
	RANDOM_ROOT=${MARIADB_RANDOM_ROOT_PASSWORD:-${MYSQL_RANDOM_ROOT_PASSWORD:-}}
	DATABASE=${MARIADB_DATABASE:-${MYSQL_DATABASE:-}}
	USER_NAME=${MARIADB_USER:-${MYSQL_USER:-}}
	USER_PASSWORD=${MARIADB_PASSWORD:-${MYSQL_PASSWORD:-}}
	if [ -z "$ROOT_PASSWORD" ] && [ -z "$ALLOW_EMPTY" ] && [ -z "$RANDOM_ROOT" ]; then
		echo 'error: the database is uninitialized and no root password option is set.' >&2
		echo '       Set one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD or MARIADB_RANDOM_ROOT_PASSWORD.' >&2
		exit 1
	fi
	if [ -n "$USER_NAME" ] && [ "$USER_NAME" = root ]; then
		echo 'error: MARIADB_USER=root is refused: root is set up by MARIADB_ROOT_PASSWORD.' >&2
		exit 1
	fi
	if [ -n "$RANDOM_ROOT" ] && [ -z "$ROOT_PASSWORD" ]; then
		ROOT_PASSWORD=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32)
		echo "GENERATED ROOT PASSWORD: $ROOT_PASSWORD"
	fi

	echo 'Initializing the database files'
	mariadb-install-db --datadir="$DATADIR" --skip-test-db --auth-root-authentication-method=normal \
		--skip-log-bin --default-time-zone=SYSTEM >/dev/null
	# A server on the socket only, to set the users up.
	mariadbd --skip-networking --socket="$SOCKET" --datadir="$DATADIR" --skip-log-bin &
	pid=$!
	tries=0
	until mariadb-admin --socket="$SOCKET" --user=root --silent ping >/dev/null 2>&1; do
		tries=$((tries + 1))
		if [ "$tries" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo 'error: the set-up server did not start' >&2
			exit 1
		fi
		sleep 0.1
	done

	root_pw=$(sql_string "$ROOT_PASSWORD")
	# printf, not echo: dash's echo would read backslashes in a password as escapes.
	{
		printf '%s\n' "SET @@SESSION.SQL_LOG_BIN=0;"
		printf '%s\n' "SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');"
		printf '%s\n' "DROP USER IF EXISTS root@'127.0.0.1', root@'::1';"
		printf '%s\n' "EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\\'', @@hostname, '\\'');"
		printf '%s\n' "ALTER USER 'root'@'localhost' IDENTIFIED BY '$root_pw';"
		printf '%s\n' "CREATE USER 'root'@'%' IDENTIFIED BY '$root_pw';"
		printf '%s\n' "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
		printf '%s\n' "GRANT PROXY ON ''@'%' TO 'root'@'%' WITH GRANT OPTION;"
		if [ -n "$DATABASE" ]; then
			printf '%s\n' "CREATE DATABASE IF NOT EXISTS \`$(sql_name "$DATABASE")\`;"
		fi
		if [ -n "$USER_NAME" ]; then
			printf '%s\n' "CREATE USER '$(sql_string "$USER_NAME")'@'%' IDENTIFIED BY '$(sql_string "$USER_PASSWORD")';"
			if [ -n "$DATABASE" ]; then
				printf '%s\n' "GRANT ALL ON \`$(sql_name "$DATABASE")\`.* TO '$(sql_string "$USER_NAME")'@'%';"
			fi
		fi
	} | mariadb --protocol=socket --socket="$SOCKET" --user=root --binary-mode

	for file in /docker-entrypoint-initdb.d/*; do
		[ -f "$file" ] || continue
		case "$file" in
		*.sh) echo "running $file"; . "$file" ;;
		*.sql) echo "running $file"; mariadb --socket="$SOCKET" --user=root --password="$ROOT_PASSWORD" ${DATABASE:+"--database=$DATABASE"} <"$file" ;;
		*.sql.gz) echo "running $file"; gunzip -c "$file" | mariadb --socket="$SOCKET" --user=root --password="$ROOT_PASSWORD" ${DATABASE:+"--database=$DATABASE"} ;;
		*) echo "ignoring $file" ;;
		esac
	done

	kill "$pid"
	wait "$pid" || true
	echo 'MariaDB init process done. Ready for start up.'
fi

exec "$@"
