#!/bin/sh
# Entrypoint of slipway-stand-in/redis:7 (scripts/stand-in-images.mjs): the official redis image's
# contract on Debian's redis-server. `redis-server [--option value…]` runs as user redis in /data,
# on every interface with protected mode off (the official build's default) unless a config
# file is given; flags alone (`docker run IMAGE --requirepass x`) go to redis-server.
set -eu

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi

if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
	find . \! -user redis -exec chown redis '{}' +
	exec setpriv --reuid=redis --regid=redis --init-groups -- "$0" "$@"
fi

if [ "$1" = redis-server ]; then
	shift
	case "${1:-}" in
	'' | -*) set -- redis-server --bind '* -::*' --protected-mode no "$@" ;;
	*) set -- redis-server "$@" ;;
	esac
fi

exec "$@"
