# shellcheck shell=bash
# scripts/lib/servers.sh: make every server the tests need reachable on loopback and
# export its LEASE_TEST_* variable. A variable already set in the environment is used
# as is (only checked). Otherwise:
#   Redis       127.0.0.1:6379, reused if it answers PING; else started (daemonized,
#               left running: it is a system-wide service, like PostgreSQL).
#   PostgreSQL  the local Debian cluster (started with pg_ctlcluster if down, created
#               with pg_createcluster if none) plus role+database "leasetest"; left running.
#   MariaDB     127.0.0.1:3306, reused if it answers; else started (service mariadb, or
#               mysqld_safe); left running. Database "test", user root without a password
#               over TCP ('root'@'127.0.0.1' created through the unix socket if needed).
#   etcd        always a private single node (client 23790, peer 23800, or the next free
#               pair) with data in $LEASE_TMP; stopped on exit.
#   ZooKeeper   always a private standalone server (21810 or the next free port),
#               tickTime=500, a fixed 256 MiB heap, data in $LEASE_TMP; stopped on exit.
#   NATS        127.0.0.1:4222, reused if its INFO says JetStream is on; else a private
#               nats-server -js (4222 or the next free port) with its store in $LEASE_TMP;
#               stopped on exit. LEASE_TEST_NATS_BIN is the binary for private servers.
#   Durability  etcd and ZooKeeper skip their fsyncs (throwaway data; an fsync per write
#               on a noisy CI disk makes timing flaky: ZooKeeper forceSync=no, etcd
#               --unsafe-no-fsync where the build has it; etcd 3.4 has not) unless
#               LEASE_TEST_DURABLE=1 (the benchmark: servers as deployed). What was
#               used is exported as LEASE_TEST_ZK_FORCESYNC and LEASE_TEST_ETCD_FSYNC
#               (yes/no; unset for a server given by its variable).
# The kube-apiserver (LEASE_TEST_K8S_KUBECONFIG) is scripts/lib/kube.sh's: built from source,
# it starts after the other tests (see scripts/test).
# Sourced by scripts/test, which sets LEASE_TMP (temp dir) and LEASE_LOG_DIR.

# ---------------------------------------------------------------- Redis

start_redis() {
	if [[ -n ${LEASE_TEST_REDIS_ADDR:-} ]]; then
		split_hostport "$LEASE_TEST_REDIS_ADDR"
		redis_ping "$_host" "$_port" || die "LEASE_TEST_REDIS_ADDR=$LEASE_TEST_REDIS_ADDR does not answer PING"
		log "redis: using LEASE_TEST_REDIS_ADDR=$LEASE_TEST_REDIS_ADDR"
		return 0
	fi
	export LEASE_TEST_REDIS_ADDR=127.0.0.1:6379
	if redis_ping 127.0.0.1 6379; then
		log "redis: already running on 127.0.0.1:6379"
		return 0
	fi
	if tcp_open 127.0.0.1 6379; then
		die "redis: something listens on 127.0.0.1:6379 but does not answer PING (auth? not Redis?); set LEASE_TEST_REDIS_ADDR"
	fi
	local dir=/var/lib/redis logfile=/var/log/redis/ci.log
	if [[ ! -d $dir || ! -w $dir ]]; then
		dir=$LEASE_STATE_DIR/redis
		mkdir -p "$dir"
	fi
	if [[ ! -d ${logfile%/*} || ! -w ${logfile%/*} ]]; then
		logfile=$LEASE_STATE_DIR/redis.log
	fi
	log "redis: starting redis-server on 127.0.0.1:6379 (dir $dir, log $logfile; left running)"
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
		--dir "$dir" --logfile "$logfile" --pidfile "$LEASE_STATE_DIR/redis.pid" </dev/null >/dev/null ||
		{ show_log "$logfile"; die "redis: redis-server failed to start"; }
	wait_until 30 "redis PING on 127.0.0.1:6379" redis_ping 127.0.0.1 6379 ||
		{ show_log "$logfile"; die "redis: not answering after start"; }
}

# ---------------------------------------------------------------- MariaDB

# maria_ready: true if a server answers on 127.0.0.1:3306 (mysqladmin ping succeeds even
# when our login is refused: it tells only that the server is up).
maria_ready() { mysqladmin --protocol=tcp -h 127.0.0.1 -P 3306 -u root --connect-timeout=2 ping >/dev/null 2>&1; }

# maria_root_tcp: true if root with no password logs in over TCP.
maria_root_tcp() { mysql --protocol=tcp -h 127.0.0.1 -P 3306 -u root --connect-timeout=5 -e 'SELECT 1' >/dev/null 2>&1; }

start_mariadb() {
	if [[ -n ${LEASE_TEST_MYSQL_DSN:-} ]]; then
		log "mariadb: using LEASE_TEST_MYSQL_DSN=$(sed -E 's#^([^:@/]*):[^@]*@#\1:***@#' <<<"$LEASE_TEST_MYSQL_DSN")"
		return 0
	fi
	if maria_ready; then
		log "mariadb: already running on 127.0.0.1:3306"
	else
		# Debian's init script runs mysqld_safe; without a working service, run it ourselves.
		log "mariadb: starting the Debian service (left running)"
		if ! as_root service mariadb start >/dev/null 2>&1; then
			as_root sh -c 'mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld && cd / &&
				nohup mysqld_safe --bind-address=127.0.0.1 >/dev/null 2>&1 &'
		fi
		wait_until 60 "mariadb on 127.0.0.1:3306" maria_ready ||
			{ show_log /var/log/mysql/error.log; die "mariadb: not ready"; }
	fi
	# Debian's root@localhost logs in by unix socket only: add a loopback-only root
	# without a password for the tests (a throwaway server), through the socket as root.
	if ! maria_root_tcp; then
		log "mariadb: creating 'root'@'127.0.0.1' (no password) for the tests"
		as_root mysql -u root -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
			GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION" ||
			die "mariadb: cannot log in as root over TCP; set LEASE_TEST_MYSQL_DSN"
	fi
	mysql --protocol=tcp -h 127.0.0.1 -P 3306 -u root -e 'CREATE DATABASE IF NOT EXISTS test' ||
		die "mariadb: could not create database test"
	export LEASE_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/test'
	log "mariadb: database test ready, DSN $LEASE_TEST_MYSQL_DSN"
}

# ---------------------------------------------------------------- PostgreSQL

PG_ROLE=${LEASE_TEST_PG_ROLE:-leasetest}
PG_DB=${LEASE_TEST_PG_DB:-leasetest}
# A throwaway password for a loopback-only test role; override with LEASE_TEST_PG_PASSWORD.
PG_PASSWORD=${LEASE_TEST_PG_PASSWORD:-leasetest-ci-pw}

pg_ready() {
	if command -v pg_isready >/dev/null 2>&1; then
		pg_isready -q -h 127.0.0.1 -p "$1" -t 2
	else
		tcp_open 127.0.0.1 "$1"
	fi
}

# pg_dsn_works DSN: true if psql can run a query with DSN.
pg_dsn_works() {
	PGCONNECT_TIMEOUT=5 psql "$1" -XAtq -v ON_ERROR_STOP=1 -c 'select 1' >/dev/null 2>&1
}

pg_redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$1"; }

start_postgres() {
	if [[ -n ${LEASE_TEST_POSTGRES_DSN:-} ]]; then
		if command -v psql >/dev/null 2>&1; then
			pg_dsn_works "$LEASE_TEST_POSTGRES_DSN" || die "LEASE_TEST_POSTGRES_DSN ($(pg_redact "$LEASE_TEST_POSTGRES_DSN")) does not work"
		fi
		log "postgres: using LEASE_TEST_POSTGRES_DSN=$(pg_redact "$LEASE_TEST_POSTGRES_DSN")"
		return 0
	fi
	local ver="" cluster="" port status want=${LEASE_TEST_PG_CLUSTER:-}
	# The cluster: LEASE_TEST_PG_CLUSTER (ver/name) if set, else an online one, else
	# any "main", else the first; created with pg_createcluster if there is none.
	pg_pick() {
		local lines
		lines=$(pg_lsclusters -h 2>/dev/null) || lines=""
		if [[ -n $want ]]; then
			lines=$(awk -v v="${want%%/*}" -v c="${want#*/}" '$1 == v && $2 == c' <<<"$lines")
		else
			lines=$( (awk '$4 == "online"' <<<"$lines"; awk '$2 == "main"' <<<"$lines"; echo "$lines") | sed '/^$/d')
		fi
		read -r ver cluster port status _ <<<"$(head -n 1 <<<"$lines")" || true
	}
	pg_pick
	if [[ -z $ver ]]; then
		if [[ -n $want ]]; then
			ver=${want%%/*} cluster=${want#*/}
		else
			ver=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1) cluster=main
		fi
		[[ -n $ver && -x /usr/lib/postgresql/$ver/bin/postgres ]] || die "postgres: no server binaries for version '$ver' in /usr/lib/postgresql"
		log "postgres: no cluster; creating $ver/$cluster with pg_createcluster"
		as_root pg_createcluster "$ver" "$cluster" >/dev/null || die "postgres: pg_createcluster $ver $cluster failed"
		pg_pick
		[[ -n $ver ]] || die "postgres: cluster not listed by pg_lsclusters after creation"
	fi
	if pg_ready "$port"; then
		log "postgres: cluster $ver/$cluster already running on port $port"
	else
		log "postgres: starting cluster $ver/$cluster (port $port; left running)"
		as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$cluster" start ||
			{ show_log "/var/log/postgresql/postgresql-$ver-$cluster.log"; die "postgres: pg_ctlcluster start failed"; }
		wait_until 60 "postgres on 127.0.0.1:$port" pg_ready "$port" ||
			{ show_log "/var/log/postgresql/postgresql-$ver-$cluster.log"; die "postgres: not ready"; }
	fi
	# Role and database, idempotently. The password goes in on stdin, never in argv.
	as_user postgres psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres \
		-v role="$PG_ROLE" -v pw="$PG_PASSWORD" -v db="$PG_DB" >/dev/null <<'SQL' || die "postgres: could not create role/database"
SELECT format('CREATE ROLE %I LOGIN', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I WITH LOGIN PASSWORD %L', :'role', :'pw') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
	export LEASE_TEST_POSTGRES_DSN="postgres://$PG_ROLE:$PG_PASSWORD@127.0.0.1:$port/$PG_DB?sslmode=disable"
	pg_dsn_works "$LEASE_TEST_POSTGRES_DSN" ||
		die "postgres: cannot log in over TCP as $PG_ROLE; check pg_hba.conf allows scram-sha-256/md5 for 127.0.0.1/32 (/etc/postgresql/$ver/$cluster/pg_hba.conf)"
	log "postgres: role/database $PG_ROLE/$PG_DB ready, DSN $(pg_redact "$LEASE_TEST_POSTGRES_DSN")"
}

# ---------------------------------------------------------------- etcd

start_etcd() {
	export LEASE_TEST_ETCD_BIN=${LEASE_TEST_ETCD_BIN:-$(command -v etcd)}
	if [[ -n ${LEASE_TEST_ETCD_ENDPOINTS:-} ]]; then
		split_hostport "${LEASE_TEST_ETCD_ENDPOINTS%%,*}"
		etcd_health "$_host" "$_port" || die "LEASE_TEST_ETCD_ENDPOINTS=$LEASE_TEST_ETCD_ENDPOINTS: first endpoint is not healthy"
		log "etcd: using LEASE_TEST_ETCD_ENDPOINTS=$LEASE_TEST_ETCD_ENDPOINTS"
		return 0
	fi
	local attempt client peer=0 dir logf pid rc
	logf=$LEASE_LOG_DIR/etcd.log
	for attempt in 1 2 3 4 5; do
		client=$(free_port $((23790 + (attempt - 1) * 100))) || die "etcd: no free client port"
		peer=$(free_port $((client + 10))) || die "etcd: no free peer port"
		dir=$LEASE_TMP/etcd-$attempt
		log "etcd: starting $LEASE_TEST_ETCD_BIN on 127.0.0.1:$client (peer $peer, fsync $LEASE_TEST_ETCD_FSYNC, data $dir)"
		# ETCD_EXTRA_FLAGS: see etcd_flags and Durability at the top.
		"$LEASE_TEST_ETCD_BIN" \
			--name leasetest --data-dir "$dir" \
			--listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
			--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
			--initial-cluster "leasetest=http://127.0.0.1:$peer" --initial-cluster-state new \
			--initial-cluster-token "leasetest-$$" \
			"${ETCD_EXTRA_FLAGS[@]}" \
			--logger zap --log-outputs stderr --log-level warn \
			</dev/null >"$logf" 2>&1 &
		pid=$!
		track_pid "$pid" etcd
		rc=0
		LEASE_WAIT_PID=$pid wait_until 30 "etcd /health on 127.0.0.1:$client" etcd_health 127.0.0.1 "$client" || rc=$?
		if ((rc == 0)); then
			export LEASE_TEST_ETCD_ENDPOINTS=127.0.0.1:$client LEASE_TEST_ETCD_FSYNC
			log "etcd: healthy on 127.0.0.1:$client (pid $pid)"
			return 0
		fi
		show_log "$logf"
		if ((rc == 2)) && grep -q 'address already in use' "$logf"; then
			log "etcd: port taken meanwhile, retrying on other ports"
			continue
		fi
		die "etcd: failed to start (see above)"
	done
	die "etcd: could not find free ports"
}

# ETCD_EXTRA_FLAGS: flags that this etcd build supports (checked once), and
# LEASE_TEST_ETCD_FSYNC: whether the private etcd fsyncs.
etcd_flags() {
	ETCD_EXTRA_FLAGS=()
	LEASE_TEST_ETCD_FSYNC=yes
	if [[ $LEASE_TEST_DURABLE != 1 ]] && "$LEASE_TEST_ETCD_BIN" --help 2>&1 | grep -q -- '--unsafe-no-fsync'; then
		ETCD_EXTRA_FLAGS+=(--unsafe-no-fsync)
		LEASE_TEST_ETCD_FSYNC=no
	fi
}

# durability: checks LEASE_TEST_DURABLE (0 or 1, default 0).
durability() {
	case ${LEASE_TEST_DURABLE:=0} in
	0 | 1) export LEASE_TEST_DURABLE ;;
	*) die "LEASE_TEST_DURABLE=$LEASE_TEST_DURABLE: want 0 or 1" ;;
	esac
}

# ---------------------------------------------------------------- NATS

start_nats() {
	export LEASE_TEST_NATS_BIN=${LEASE_TEST_NATS_BIN:-$(command -v nats-server)}
	if [[ -n ${LEASE_TEST_NATS_URL:-} ]]; then
		split_hostport "$LEASE_TEST_NATS_URL"
		nats_js "$_host" "$_port" || die "LEASE_TEST_NATS_URL=$LEASE_TEST_NATS_URL: no NATS server with JetStream answers"
		log "nats: using LEASE_TEST_NATS_URL=$LEASE_TEST_NATS_URL"
		return 0
	fi
	if nats_js 127.0.0.1 4222; then
		export LEASE_TEST_NATS_URL=nats://127.0.0.1:4222
		log "nats: a server with JetStream already runs on 127.0.0.1:4222"
		return 0
	fi
	local attempt port dir logf pid rc
	logf=$LEASE_LOG_DIR/nats.log
	for attempt in 1 2 3 4 5; do
		port=$(free_port $((4222 + (attempt - 1) * 100))) || die "nats: no free port"
		dir=$LEASE_TMP/nats-$attempt
		mkdir -p "$dir"
		log "nats: starting $LEASE_TEST_NATS_BIN -js on 127.0.0.1:$port (store $dir)"
		"$LEASE_TEST_NATS_BIN" -a 127.0.0.1 -p "$port" -js -sd "$dir" </dev/null >"$logf" 2>&1 &
		pid=$!
		track_pid "$pid" nats
		rc=0
		LEASE_WAIT_PID=$pid wait_until 30 "nats JetStream on 127.0.0.1:$port" nats_js 127.0.0.1 "$port" || rc=$?
		if ((rc == 0)); then
			export LEASE_TEST_NATS_URL=nats://127.0.0.1:$port
			log "nats: JetStream on 127.0.0.1:$port (pid $pid)"
			return 0
		fi
		show_log "$logf"
		if ((rc == 2)) && grep -qi 'address already in use' "$logf"; then
			log "nats: port taken meanwhile, retrying on another port"
			continue
		fi
		die "nats: failed to start (see above)"
	done
	die "nats: could not find a free port"
}

# ---------------------------------------------------------------- ZooKeeper

# zk_classpath BINDING: the ZooKeeper server classpath from $ZK_JAR_DIR with the given
# slf4j binding jar (slf4j-nop or slf4j-simple). Fails naming any jar that is missing.
zk_classpath() {
	local binding=$1 cp="" j f missing=()
	for j in zookeeper zookeeper-jute slf4j-api "$binding" commons-cli metrics-core; do
		f=$ZK_JAR_DIR/$j.jar
		if [[ -e $f ]]; then cp+=${cp:+:}$f; else missing+=("$j.jar"); fi
	done
	# Netty: the single netty-all jar if present, else the split jars ZooKeeper uses.
	if [[ -e $ZK_JAR_DIR/netty-all.jar ]]; then
		cp+=:$ZK_JAR_DIR/netty-all.jar
	else
		for j in netty-buffer netty-codec netty-common netty-handler netty-resolver \
			netty-transport netty-transport-native-epoll netty-transport-native-unix-common \
			netty-transport-classes-epoll; do
			f=$ZK_JAR_DIR/$j.jar
			[[ -e $f ]] && cp+=:$f
		done
	fi
	if ((${#missing[@]})); then
		log "zookeeper: missing jars in $ZK_JAR_DIR: ${missing[*]}"
		return 1
	fi
	echo "$cp"
}

start_zookeeper() {
	export LEASE_TEST_JAVA=${LEASE_TEST_JAVA:-$(readlink -f "$(command -v java)")}
	if [[ -z ${LEASE_TEST_ZK_CLASSPATH:-} ]]; then
		LEASE_TEST_ZK_CLASSPATH=$(zk_classpath slf4j-nop) || die "zookeeper: incomplete classpath"
		export LEASE_TEST_ZK_CLASSPATH
	fi
	if [[ -n ${LEASE_TEST_ZK_SERVERS:-} ]]; then
		split_hostport "${LEASE_TEST_ZK_SERVERS%%,*}"
		zk_ruok "$_host" "$_port" || die "LEASE_TEST_ZK_SERVERS=$LEASE_TEST_ZK_SERVERS: first server does not answer imok"
		log "zookeeper: using LEASE_TEST_ZK_SERVERS=$LEASE_TEST_ZK_SERVERS"
		return 0
	fi
	# Our own server logs through slf4j-simple so startup errors are visible in its log.
	local cp
	cp=$(zk_classpath slf4j-simple 2>/dev/null) || cp=$LEASE_TEST_ZK_CLASSPATH
	local attempt port dir cfg logf pid rc
	logf=$LEASE_LOG_DIR/zookeeper.log
	local sync=no
	[[ $LEASE_TEST_DURABLE == 1 ]] && sync=yes
	for attempt in 1 2 3 4 5; do
		port=$(free_port $((21810 + (attempt - 1) * 100))) || die "zookeeper: no free port"
		dir=$LEASE_TMP/zk-$attempt
		cfg=$dir/zoo.cfg
		mkdir -p "$dir/data"
		cat >"$cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
forceSync=$sync
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
EOF
		log "zookeeper: starting on 127.0.0.1:$port (tickTime=500, forceSync=$sync, data $dir)"
		# A fixed heap (ZooKeeper's own advice) with a small young generation:
		# young collections stay at 1-2 ms, and the old generation never fills
		# in a run. With -Xms32m it filled every ~30 s of contention and a
		# 12-20 ms full collection stalled every client (measured with
		# -Xlog:gc during bench contention runs, 2026-12-01).
		"$LEASE_TEST_JAVA" -Xms256m -Xmx256m -Xmn12m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
			-Djava.net.preferIPv4Stack=true -Dzookeeper.admin.enableServer=false \
			-Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
			-cp "$cp" org.apache.zookeeper.server.ZooKeeperServerMain "$cfg" \
			</dev/null >"$logf" 2>&1 &
		pid=$!
		track_pid "$pid" zookeeper
		rc=0
		LEASE_WAIT_PID=$pid wait_until 60 "zookeeper imok on 127.0.0.1:$port" zk_ruok 127.0.0.1 "$port" || rc=$?
		if ((rc == 0)); then
			export LEASE_TEST_ZK_SERVERS=127.0.0.1:$port LEASE_TEST_ZK_FORCESYNC=$sync
			log "zookeeper: imok on 127.0.0.1:$port (pid $pid)"
			return 0
		fi
		show_log "$logf"
		if ((rc == 2)) && grep -qi 'address already in use' "$logf"; then
			log "zookeeper: port taken meanwhile, retrying on another port"
			continue
		fi
		die "zookeeper: failed to start (see above)"
	done
	die "zookeeper: could not find a free port"
}

# start_servers: all of the above; sets every LEASE_TEST_* variable.
start_servers() {
	start_redis
	start_postgres
	start_mariadb
	export LEASE_TEST_ETCD_BIN=${LEASE_TEST_ETCD_BIN:-$(command -v etcd)}
	durability
	etcd_flags
	start_etcd
	start_zookeeper
	start_nats
	export LEASE_TEST_REQUIRE_ALL=1
}
