# shellcheck shell=bash
# scripts/lib/common.sh: logging, root/sudo helpers, loopback probes (bash /dev/tcp,
# no nc/curl needed) and tracking of background processes started by ./scripts/test.
# Sourced by scripts/test; not meant to be run on its own.

log() { printf 'scripts/test: %s\n' "$*" >&2; }
die() {
	printf 'scripts/test: FATAL: %s\n' "$*" >&2
	exit 1
}

# as_root CMD...: run CMD as root (directly when we are root, else with sudo -n).
as_root() {
	if [[ $EUID -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root (or passwordless sudo) to run: $*"
	fi
}

# as_user USER CMD...: run CMD as USER.
as_user() {
	local user=$1
	shift
	if [[ $EUID -eq 0 ]]; then
		runuser -u "$user" -- "$@"
	elif [[ $(id -un) == "$user" ]]; then
		"$@"
	else
		sudo -n -u "$user" -- "$@"
	fi
}

# wait_until SECONDS WHAT CMD...: poll CMD every 0.2s until it succeeds; fail after
# SECONDS. If LEASE_WAIT_PID is set and that process dies, stop waiting early.
wait_until() {
	local secs=$1 what=$2
	shift 2
	local deadline=$((SECONDS + secs))
	while ! "$@"; do
		if [[ -n ${LEASE_WAIT_PID:-} ]] && ! kill -0 "$LEASE_WAIT_PID" 2>/dev/null; then
			return 2
		fi
		if ((SECONDS >= deadline)); then
			log "timed out after ${secs}s waiting for $what"
			return 1
		fi
		sleep 0.2
	done
}

# split_hostport HOST:PORT -> sets _host and _port ([v6]:port accepted).
split_hostport() {
	local hp=${1#*://}
	hp=${hp%%/*}
	_port=${hp##*:}
	_host=${hp%:*}
	_host=${_host#[}
	_host=${_host%]}
}

# tcp_open HOST PORT: true if something accepts a TCP connection.
tcp_open() {
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# redis_ping HOST PORT: true if a Redis answers PING with +PONG.
redis_ping() {
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "PING\r\n" >&3 && IFS= read -r l <&3 && [[ $l == +PONG* ]]' "$1" "$2" 2>/dev/null
}

# zk_ruok HOST PORT: true if a ZooKeeper answers the ruok four-letter word with imok.
zk_ruok() {
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf ruok >&3 && IFS= read -r -n 4 l <&3; [[ $l == imok ]]' "$1" "$2" 2>/dev/null
}

# nats_js HOST PORT: true if a NATS server's INFO line says JetStream is enabled.
nats_js() {
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && IFS= read -r l <&3 && [[ $l == INFO* && $l == *'"'"'"jetstream":true'"'"'* ]]' "$1" "$2" 2>/dev/null
}

# etcd_health HOST PORT: true if etcd's GET /health says {"health":"true"}.
etcd_health() {
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "GET /health HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" >&3 && cat <&3' "$1" "$2" 2>/dev/null |
		grep -q '"health":"true"'
}

# free_port START: print the first port >= START (step 10, up to 20 tries) that
# nothing on 127.0.0.1 listens on.
free_port() {
	local p=$1 i
	for ((i = 0; i < 20; i++)); do
		if ! tcp_open 127.0.0.1 "$p"; then
			echo "$p"
			return 0
		fi
		p=$((p + 10))
	done
	return 1
}

# Background processes started by this run; stopped by stop_started on exit.
STARTED_PIDS=()
STARTED_NAMES=()

track_pid() {
	STARTED_PIDS+=("$1")
	STARTED_NAMES+=("$2")
}

# stop_pid PID: TERM, wait up to 10s, then KILL.
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

stop_started() {
	local i
	for i in "${!STARTED_PIDS[@]}"; do
		log "stopping ${STARTED_NAMES[$i]} (pid ${STARTED_PIDS[$i]})"
		stop_pid "${STARTED_PIDS[$i]}"
	done
	STARTED_PIDS=()
	STARTED_NAMES=()
}

# show_log FILE: print the last lines of a server log after a startup failure.
show_log() {
	[[ -f $1 ]] || return 0
	log "---- last lines of $1 ----"
	tail -n 40 "$1" >&2
	log "----"
}
