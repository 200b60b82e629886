# shellcheck shell=bash
# shellcheck disable=SC2034  # the settings are used by kube-up and kube-down
# Shared code of .ci/kube-up and .ci/kube-down: a real single-node Kubernetes
# (etcd, kube-apiserver, a second containerd, kubelet, kube-controller-manager,
# kube-scheduler) for the Kubernetes runtime's end-to-end tests. Sourced, not run.
# See docs/kube-test-cluster.md.

KUBE_VERSION=v1.34.4
# The staging modules (k8s.io/api, client-go, ...) are published as v0.<minor>.<patch>.
KUBE_STAGING_VERSION=v0.${KUBE_VERSION#v1.}
KUBE_CACHE_ROOT=${TROUPE_KUBE_CACHE:-/var/cache/troupe-kube}
KUBE_DEFAULT_STATE=${TROUPE_KUBE_STATE:-/var/tmp/troupe-kube}
KUBE_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kube-lib.sh

# Ports, all bound on 127.0.0.1 but the apiserver's and the kubelet's (which
# the apiserver reaches on the node IP).
KUBE_APISERVER_PORT=6443
KUBE_ETCD_PORT=12379      # not etcd's default, so a system etcd cannot clash
KUBE_ETCD_PEER_PORT=12380
KUBE_KUBELET_PORT=10250
KUBE_KUBELET_HEALTHZ_PORT=10248
KUBE_CM_PORT=10257
KUBE_SCHED_PORT=10259
KUBE_POD_SUBNET=10.244.0.0/24
KUBE_SERVICE_RANGE=10.96.0.0/12
KUBE_SERVICE_IP=10.96.0.1
KUBE_BRIDGE=cni0
KUBE_SANDBOX_IMAGE=troupe.local/pause:v1
# Start order; kube-down stops in the reverse one (so the apiserver before etcd).
KUBE_COMPONENTS=(etcd kube-apiserver containerd kubelet kube-controller-manager kube-scheduler)
# Kernel settings the kubelet changes when it starts; kube-down puts them back.
KUBE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

kube_log() { printf '[kube %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
kube_die() {
  printf '\nkube FAILED: %s\n' "$*" >&2
  exit 1
}

# kube_state_dir DIR: the absolute state folder, refusing a dangerous one.
kube_state_dir() {
  local d=${1:-$KUBE_DEFAULT_STATE} given=${1:-$KUBE_DEFAULT_STATE}
  case $d in
    /*) ;;
    *) d=$PWD/$d ;;
  esac
  d=${d%/}
  case $d in
    "" | / | /bin | /boot | /dev | /etc | /home | /lib | /opt | /proc | /root | /run | /sys | /tmp | /usr | /var | /var/tmp | /var/lib | /var/cache)
      kube_die "refusing $given as the cluster's state folder (it is wiped at every start)" ;;
  esac
  printf '%s\n' "$d"
}

# kube_paths STATE: sets the variables every script uses.
kube_paths() {
  S=$1
  PKI=$S/pki
  LOGS=$S/logs
  RUN=$S/run
  CTRD_SOCK=$S/containerd/containerd.sock
  ADMIN_KUBECONFIG=$S/admin.kubeconfig
}

# The node's name and IP: the host name, and the source address of the default route.
kube_node_name() { hostname | tr '[:upper:]' '[:lower:]'; }
kube_node_ip() {
  local ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)
  [ -n "$ip" ] || ip=$(ip -4 -o addr show scope global | awk '{sub("/.*","",$4); print $4; exit}')
  [ -n "$ip" ] || return 1
  printf '%s\n' "$ip"
}

# kube_pid NAME: the pid of a component that is running, or nothing. A pid file
# whose process is gone, or is now another program, does not count.
kube_pid() {
  local f=$RUN/$1.pid pid exe
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && kube_alive "$pid" || return 1
  exe=$(cat "$RUN/$1.exe" 2>/dev/null) || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] || return 1
  printf '%s\n' "$pid"
}

# kube_alive PID: the process exists and is not a zombie.
kube_alive() {
  [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# kube_stop_pid NAME PID SECONDS: SIGTERM, then SIGKILL once SECONDS have passed.
kube_stop_pid() {
  local name=$1 pid=$2 bound=$3 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < bound * 10; i++)); do
    # Gone, or a zombie not yet reaped by its parent.
    if ! kube_alive "$pid"; then
      kube_log "stopped $name (pid $pid, $((i / 10)).$((i % 10))s)"
      return 0
    fi
    sleep 0.1
  done
  kube_log "$name (pid $pid) still running after ${bound}s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kube_alive "$pid" || return 0
    sleep 0.1
  done
  kube_log "WARNING: $name (pid $pid) survived SIGKILL"
}

# kube_ctr ARGS...: ctr on the cluster's containerd (never Docker's).
kube_ctr() { ctr --address "$CTRD_SOCK" --namespace k8s.io "$@"; }

# kube_import_images IMAGE...: copies local Docker images into the cluster's
# containerd, where pods find them by full name (docker.io/library/busybox:latest)
# with imagePullPolicy: Never.
kube_import_images() {
  local img
  [ -S "$CTRD_SOCK" ] || kube_die "the cluster's containerd is not running ($CTRD_SOCK): run .ci/kube-up first"
  for img in "$@"; do
    docker image inspect "$img" >/dev/null 2>&1 || kube_die "image $img is not in Docker (for busybox:latest, run .ci/seed-images)"
    kube_log "importing $img into the cluster's containerd"
    docker save "$img" | kube_ctr images import - >&2 ||
      kube_die "importing $img failed"
  done
}

# kube_curl PATH [CURL ARGS...]: the apiserver as the cluster admin.
kube_curl() {
  local p=$1
  shift
  curl -sS --fail --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$KUBE_APISERVER_PORT$p" "$@"
}

# ---- BEGIN BUILD (this part's sha256 is in the cache key) ----
# kube_build OUT: builds the four Kubernetes binaries and the sandbox image
# (pause.tar) into OUT. Runs in a scratch folder outside any checkout.
kube_build() (
  out=$1
  work=$(mktemp -d /var/tmp/troupe-kube-build.XXXXXX) || exit 1
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
  kube_log "downloading k8s.io/kubernetes@$KUBE_VERSION"
  src=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | jq -r .Dir) &&
    [ -d "$src" ] || { kube_log "go mod download k8s.io/kubernetes@$KUBE_VERSION failed"; return 1; }
  cp -r "$src" "$work/src" && chmod -R u+w "$work/src" || return 1
  cd "$work/src" || return 1
  # The module zip has no staging sources: require the published staging modules instead.
  rm -rf go.work go.work.sum vendor
  mods=$(go mod edit -json | jq -r '.Replace[]? | select(.New.Path | startswith("./staging/")) | .Old.Path')
  [ -n "$mods" ] || { kube_log "no staging replacements in k8s.io/kubernetes's go.mod"; return 1; }
  for m in $mods; do
    go mod edit -dropreplace="$m" -require="$m@$KUBE_STAGING_VERSION" || return 1
  done
  ldflags="-s -w"
  for m in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $m.gitVersion=$KUBE_VERSION -X $m.gitMajor=1"
    ldflags+=" -X $m.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION") -X $m.gitTreeState=clean"
    ldflags+=" -X $m.buildDate=1970-01-01T00:00:00Z -X $m.gitCommit=troupe-module-build"
  done
  kube_log "building kube-apiserver, kubelet, kube-controller-manager, kube-scheduler (several minutes)"
  mkdir -p "$out"
  # No DWARF: the link strips it anyway (-s -w), and not generating it
  # saves the compiler about 4% of a build that is CPU-bound on a fresh
  # machine.
  go build -mod=mod -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "$out/" \
    ./cmd/kube-apiserver ./cmd/kubelet ./cmd/kube-controller-manager ./cmd/kube-scheduler || return 1

  # The sandbox ("pause") image: PID 1 of every pod. Blocks until SIGTERM or
  # SIGINT, and reaps the children it inherits.
  kube_log "building the sandbox image $KUBE_SANDBOX_IMAGE"
  mkdir -p "$work/pause/ctx" && cd "$work/pause" || return 1
  cat >go.mod <<'EOF'
module troupe.local/pause

go 1.22
EOF
  cat >main.go <<'EOF'
// Command pause is the sandbox process of a pod: it waits for SIGTERM or
// SIGINT and reaps the zombies it inherits as PID 1.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
  go build -trimpath -ldflags "-s -w" -o ctx/pause . || return 1
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >ctx/Dockerfile
  DOCKER_BUILDKIT=0 docker build -q -t "$KUBE_SANDBOX_IMAGE" ctx >/dev/null &&
    docker save "$KUBE_SANDBOX_IMAGE" >"$out/pause.tar" || return 1
  docker rmi "$KUBE_SANDBOX_IMAGE" >/dev/null || true
)
# ---- END BUILD ----

# kube_cache_key: Kubernetes version, digest of the build part above, Go version.
kube_cache_key() {
  local digest gov
  digest=$(sed -n '/^# ---- BEGIN BUILD/,/^# ---- END BUILD/p' "$KUBE_LIB" | sha256sum | cut -c1-16)
  gov=$(go env GOVERSION 2>/dev/null) || return 1
  printf '%s-%s-%s\n' "$KUBE_VERSION" "$digest" "$gov"
}
