# shellcheck shell=bash
# scripts/lib/install.sh: install the packages the tests need (servers, a browser) with apt-get,
# only when something is missing (one `apt-get update` at most per run).
#   redis-server, postgresql,           only if the binary is missing AND nothing answers
#   mariadb-server
#   etcd-server (/usr/bin/etcd)         always needed (tests may start private clusters)
#   nats-server                         always needed (natslease's restart test starts its own)
#   libzookeeper-java (jars)            always needed; the `zookeeper` package only adds a
#                                       system service on :2181 plus the full default-jre,
#                                       so we install just the jars and run ZooKeeperServerMain
#   default-jre-headless                only if `java -version` fails
#   chromium                            always needed (leasedebug's page is tested in headless Chromium)
#   openssl, curl                       always needed (the kube-apiserver's certificates, its /readyz)
#   iproute2, nftables                  always needed (verify's partition tests: ip netns, veth pairs,
#                                       nft rules inside the namespaces)
#   faketime (libfaketime)              always needed (verify's store clock faults run private
#                                       servers under it)
# apt waits up to 180s for the dpkg lock (a fresh machine may be running apt-daily).
# Sourced by scripts/test.

ZK_JAR_DIR=${LEASE_TEST_ZK_JAR_DIR:-/usr/share/java}

java_works() {
	local j
	j=$(command -v java 2>/dev/null) || return 1
	"$j" -version >/dev/null 2>&1
}

pg_bin_present() {
	compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

# missing_packages: print the Debian packages to install, one per line.
missing_packages() {
	if [[ -z ${LEASE_TEST_REDIS_ADDR:-} ]] && ! command -v redis-server >/dev/null 2>&1 &&
		! redis_ping 127.0.0.1 6379; then
		echo redis-server
	fi
	if [[ -z ${LEASE_TEST_POSTGRES_DSN:-} ]] && ! pg_bin_present; then
		echo postgresql
	fi
	if [[ -z ${LEASE_TEST_MYSQL_DSN:-} ]] && ! command -v mariadbd >/dev/null 2>&1 &&
		! command -v mysqld >/dev/null 2>&1 && ! tcp_open 127.0.0.1 3306; then
		echo mariadb-server
	fi
	if ! command -v etcd >/dev/null 2>&1; then
		echo etcd-server
	fi
	if ! command -v nats-server >/dev/null 2>&1; then
		echo nats-server
	fi
	if [[ ! -e $ZK_JAR_DIR/zookeeper.jar ]]; then
		echo libzookeeper-java
	fi
	if ! java_works; then
		echo default-jre-headless
	fi
	if ! command -v chromium >/dev/null 2>&1; then
		echo chromium
	fi
	command -v openssl >/dev/null 2>&1 || echo openssl
	command -v curl >/dev/null 2>&1 || echo curl
	command -v ip >/dev/null 2>&1 || echo iproute2
	command -v nft >/dev/null 2>&1 || echo nftables
	compgen -G '/usr/lib/*/faketime/libfaketimeMT.so.1' >/dev/null || echo faketime
}

# install_missing: apt-get install what missing_packages reports.
install_missing() {
	local pkgs
	mapfile -t pkgs < <(missing_packages)
	if ((${#pkgs[@]} == 0)); then
		return 0
	fi
	if [[ ${LEASE_TEST_NO_INSTALL:-0} == 1 ]]; then
		die "missing packages: ${pkgs[*]} (and --no-install was given)"
	fi
	command -v apt-get >/dev/null 2>&1 || die "missing packages ${pkgs[*]} and no apt-get: install them by hand"
	log "installing with apt-get: ${pkgs[*]}"
	local t0=$SECONDS
	# Keep maintainer scripts from starting system services (etcd on :2379, ...):
	# this script starts exactly the servers it needs itself.
	local made_policy=0
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
		made_policy=1
	fi
	local rc=0 aptlog=$LEASE_STATE_DIR/apt.log
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=180 update -q >"$aptlog" 2>&1 || rc=$?
	if ((rc == 0)); then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=180 install -y -q --no-install-recommends \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
			"${pkgs[@]}" >>"$aptlog" 2>&1 || rc=$?
	fi
	if ((made_policy)); then
		as_root rm -f /usr/sbin/policy-rc.d
	fi
	if ((rc != 0)); then
		show_log "$aptlog"
		die "apt-get failed (exit $rc) installing: ${pkgs[*]} (full log: $aptlog)"
	fi
	log "installed ${pkgs[*]} in $((SECONDS - t0))s (log: $aptlog)"
	mapfile -t pkgs < <(missing_packages)
	((${#pkgs[@]} == 0)) || die "still missing after apt-get install: ${pkgs[*]}"
}
