# shellcheck shell=bash
# scripts/lib/kube.sh: a private kube-apiserver for k8slease's tests, built from source.
# No kube-apiserver binary can be downloaded here, so it is built from k8s.io/kubernetes
# (the module proxy has it) by the module in scripts/kube-apiserver (one replace per
# staging module) and cached as .cache/bin/kube-apiserver-$KUBE_VERSION. A clean build
# takes minutes (see docs/stores.md): scripts/test starts it in the background first.
#   kube_build     build the binary if it is not cached (atomic: a temp file renamed).
#   start_kube     a private etcd (its own data dir and ports) and a kube-apiserver on
#                  127.0.0.1 with a serving certificate, service-account keys and a
#                  random bearer token made here, authorization AlwaysAllow; exports
#                  LEASE_TEST_K8S_KUBECONFIG (a kubeconfig with the CA and the token).
#                  Both are stopped on exit (track_pid). LEASE_TEST_K8S_KUBECONFIG
#                  already set is used as is.
# Needs common.sh (log, die, wait_until, free_port, track_pid), LEASE_TMP, LEASE_LOG_DIR
# and LEASE_TEST_ETCD_BIN.

KUBE_VERSION=v1.37.2
KUBE_BIN=${LEASE_TEST_K8S_APISERVER:-${ROOT:?}/.cache/bin/kube-apiserver-$KUBE_VERSION}

# At nice 19: it runs beside the other steps and the tests (which mostly sleep) on the CPU
# they leave idle, and barely slows them.
kube_build() {
	[[ -x $KUBE_BIN ]] && return 0
	mkdir -p "${KUBE_BIN%/*}"
	log "kube-apiserver: building $KUBE_VERSION into $KUBE_BIN (minutes on a clean cache)"
	(cd "$ROOT/scripts/kube-apiserver" && GOFLAGS=-mod=readonly nice -n 19 \
		go build -trimpath -o "$KUBE_BIN.tmp.$$" k8s.io/kubernetes/cmd/kube-apiserver) &&
		mv "$KUBE_BIN.tmp.$$" "$KUBE_BIN"
}

# kube_ready URL TOKEN CA: true if the apiserver says ok on /readyz.
kube_ready() {
	[[ $(curl -s --max-time 3 --cacert "$3" -H "Authorization: Bearer $2" "$1/readyz" 2>/dev/null) == ok ]]
}

# kube_certs DIR: a CA, a serving certificate for 127.0.0.1 and a service-account key pair.
kube_certs() {
	local d=$1
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=leasekit-test-ca -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kube-apiserver \
			-keyout "$d/serving.key" -out "$d/serving.csr" 2>/dev/null &&
		openssl x509 -req -in "$d/serving.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
			-extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n') \
			-out "$d/serving.crt" 2>/dev/null &&
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/sa.key" 2>/dev/null &&
		openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

start_kube() {
	if [[ -n ${LEASE_TEST_K8S_KUBECONFIG:-} ]]; then
		[[ -r $LEASE_TEST_K8S_KUBECONFIG ]] || die "LEASE_TEST_K8S_KUBECONFIG=$LEASE_TEST_K8S_KUBECONFIG is not readable"
		log "kube: using LEASE_TEST_K8S_KUBECONFIG=$LEASE_TEST_K8S_KUBECONFIG"
		return 0
	fi
	[[ -x $KUBE_BIN ]] || die "kube-apiserver: $KUBE_BIN is missing (kube_build failed?)"
	local dir=$LEASE_TMP/kube client peer port token pid rc
	mkdir -p "$dir"
	kube_certs "$dir" || die "kube: openssl could not make the certificates"
	token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s,leasekit-test,leasekit-test,system:masters\n' "$token" >"$dir/tokens.csv"
	client=$(free_port 23990) || die "kube: no free etcd client port"
	peer=$(free_port $((client + 5))) || die "kube: no free etcd peer port"
	log "kube: starting its private etcd on 127.0.0.1:$client"
	"$LEASE_TEST_ETCD_BIN" --name kube --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
		--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "kube=http://127.0.0.1:$peer" --initial-cluster-state new \
		"${ETCD_EXTRA_FLAGS[@]}" --logger zap --log-outputs stderr --log-level warn \
		</dev/null >"$LEASE_LOG_DIR/kube-etcd.log" 2>&1 &
	pid=$!
	track_pid "$pid" kube-etcd
	LEASE_WAIT_PID=$pid wait_until 30 "kube's etcd on 127.0.0.1:$client" etcd_health 127.0.0.1 "$client" ||
		{ show_log "$LEASE_LOG_DIR/kube-etcd.log"; die "kube: its etcd failed to start"; }
	port=$(free_port 26443) || die "kube: no free apiserver port"
	log "kube: starting kube-apiserver $KUBE_VERSION on 127.0.0.1:$port"
	"$KUBE_BIN" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
		--etcd-servers="http://127.0.0.1:$client" --cert-dir="$dir" \
		--tls-cert-file="$dir/serving.crt" --tls-private-key-file="$dir/serving.key" \
		--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$dir/sa.pub" \
		--service-account-signing-key-file="$dir/sa.key" --token-auth-file="$dir/tokens.csv" \
		--authorization-mode=AlwaysAllow --anonymous-auth=false --service-cluster-ip-range=10.96.0.0/24 \
		--endpoint-reconciler-type=none --profiling=false --v=0 \
		</dev/null >"$LEASE_LOG_DIR/kube-apiserver.log" 2>&1 &
	pid=$!
	track_pid "$pid" kube-apiserver
	rc=0
	LEASE_WAIT_PID=$pid wait_until 90 "kube-apiserver /readyz on 127.0.0.1:$port" \
		kube_ready "https://127.0.0.1:$port" "$token" "$dir/ca.crt" || rc=$?
	((rc == 0)) || { show_log "$LEASE_LOG_DIR/kube-apiserver.log"; die "kube: kube-apiserver failed to start"; }
	cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: leasekit-test
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 -w0 <"$dir/ca.crt")
users:
- name: leasekit-test
  user:
    token: $token
contexts:
- name: leasekit-test
  context: {cluster: leasekit-test, user: leasekit-test, namespace: default}
current-context: leasekit-test
EOF
	chmod 600 "$dir/kubeconfig" "$dir/tokens.csv"
	export LEASE_TEST_K8S_KUBECONFIG=$dir/kubeconfig
	log "kube: kube-apiserver ready on 127.0.0.1:$port (pid $pid), LEASE_TEST_K8S_KUBECONFIG=$LEASE_TEST_K8S_KUBECONFIG"
}
