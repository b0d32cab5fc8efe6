#!/usr/bin/env bash
# Load on kuota's visibility API (Kueue's `pendingworkloads`) through the real API server,
# by hand, not in CI: 50,000 pending Workloads in one ClusterQueue, pages of 1,000 read by
# 50 concurrent clients (curl --parallel, one HTTP/1.1 connection each), three ways in the
# same run:
#   1. through the API server's aggregator (what `kubectl get --raw` and kubectl-kuota do);
#   2. straight at kuota with the front proxy's client certificate (kuota alone);
#   3. baseline: the API server's own discovery document `/apis/kueue.x-k8s.io/v1beta2`
#      through the same client, connection settings and concurrency.
#
#   K8S=/path/to/k8s/cluster benches/visibility/run.sh
#   KUOTA_BIN=... (default target/release/kuota)  WORKLOADS=50000  REQUESTS=10000  CLIENTS=50
#   BASE_BIN=...  another kuota binary measured the same way after the first, on the same
#                 cluster (e.g. a build before a change)
#
# The control plane is started on its own state directory (KUOTA_K8S_DIR, default
# $TMPDIR/kuota-k8s-vis) and wiped first; kuota runs on the host and the API server reaches
# it through an ExternalName Service. Every process started here is stopped on exit.
set -euo pipefail

K8S=${K8S:?set K8S to the control plane script (cluster up/down/env)}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KUOTA_BIN=${KUOTA_BIN:-$ROOT/target/release/kuota}
BASE_BIN=${BASE_BIN:-}
WORKLOADS=${WORKLOADS:-50000}
REQUESTS=${REQUESTS:-10000}
CLIENTS=${CLIENTS:-50}
LIMIT=${LIMIT:-1000}
PORT=${PORT:-18082}
export KUOTA_K8S_DIR=${KUOTA_K8S_DIR:-${TMPDIR:-/tmp}/kuota-k8s-vis}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]:-}"; do [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
[[ -x "$KUOTA_BIN" ]] || { echo "run.sh: no kuota binary at $KUOTA_BIN (cargo build --release)" >&2; exit 1; }

"$K8S" down --wipe >/dev/null 2>&1 || true
eval "$("$K8S" up --no-controller-manager)"
eval "$("$K8S" env)"
K=$KUOTA_K8S_KUBECTL
PKI=$KUOTA_K8S_DIR/pki
SERVER=$($K config view --minify -o jsonpath='{.clusters[0].cluster.server}')

# kuota's serving certificate (ECDSA P-256), for the names the aggregator dials.
openssl ecparam -name prime256v1 -genkey -noout -out "$WORK/ca.key" 2>/dev/null
openssl req -x509 -new -key "$WORK/ca.key" -subj /CN=kuota-bench-ca -days 1 -out "$WORK/ca.crt" 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out "$WORK/tls.key" 2>/dev/null
openssl req -new -key "$WORK/tls.key" -subj /CN=localhost -out "$WORK/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,DNS:kuota-visibility.kuota-bench.svc\n' > "$WORK/san.ext"
openssl x509 -req -in "$WORK/tls.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 1 -extfile "$WORK/san.ext" -out "$WORK/tls.crt" 2>/dev/null

echo "== CRDs, queues and $WORKLOADS pending Workloads" >&2
"$KUOTA_BIN" crds | $K apply --server-side -f - >/dev/null
for _ in $(seq 1 60); do
    $K wait --for condition=established --timeout=1s crd/workloads.kueue.x-k8s.io crd/clusterqueues.kueue.x-k8s.io \
        crd/localqueues.kueue.x-k8s.io crd/resourceflavors.kueue.x-k8s.io >/dev/null 2>&1 && break
    sleep 1
done
$K create namespace kuota-bench >/dev/null
$K create namespace kuota-system >/dev/null
$K apply -f - >/dev/null <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "0"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: kuota-bench}
spec: {clusterQueue: cq}
YAML
python3 - "$WORKLOADS" "$WORK" <<'PY'
import json, sys
n, out = int(sys.argv[1]), sys.argv[2]
for chunk in range(0, n, 1000):
    items = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
              "metadata": {"name": f"wl-{i:05d}", "namespace": "kuota-bench"},
              "spec": {"queueName": "lq", "priority": i % 7, "podSets": [{"name": "main", "count": 1,
                  "template": {"spec": {"containers": [{"name": "c", "image": "i",
                      "resources": {"requests": {"cpu": "1"}}}]}}}]}}
             for i in range(chunk, min(n, chunk + 1000))]
    with open(f"{out}/wl-{chunk // 1000:03d}.json", "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
PY
start=$(date +%s)
ls "$WORK"/wl-*.json | xargs -P 6 -I{} sh -c "$K create -f {} >/dev/null"
echo "created in $(( $(date +%s) - start )) s" >&2

echo "== the APIService through an ExternalName Service" >&2
CA_B64=$(base64 -w0 < "$WORK/ca.crt")
$K apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: kuota-visibility, namespace: kuota-bench}
spec: {type: ExternalName, externalName: localhost, ports: [{port: $PORT, protocol: TCP}]}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta2.visibility.kueue.x-k8s.io}
spec:
  group: visibility.kueue.x-k8s.io
  version: v1beta2
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: $CA_B64
  service: {name: kuota-visibility, namespace: kuota-bench, port: $PORT}
YAML

PAGE=/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads
ADMIN=(--cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
DIRECT=(--cacert "$WORK/ca.crt" --cert "$PKI/front-proxy-client.crt" --key "$PKI/front-proxy-client.key"
        -H "X-Remote-User: kubernetes-admin" -H "X-Remote-Group: system:masters")
# Starts `kuota serve` ($1) and waits until it is ready: once the last Workload has its
# place in the queue, and kuota's pending-status writes (one per Workload) are done, so
# that the load meets a quiet cluster.
start_kuota() {
    "$1" serve --cert-dir "$WORK" --listen 127.0.0.1:0 --health-listen 127.0.0.1:0 \
        --metrics-listen 127.0.0.1:0 --visibility-listen "127.0.0.1:$PORT" >>"$WORK/kuota.log" 2>&1 &
    KUOTA_PID=$!
    PIDS+=($KUOTA_PID)
    local last=$((WORKLOADS - 1)) got=-1 done_=0
    for _ in $(seq 1 600); do
        got=$(curl -s "${ADMIN[@]}" "$SERVER$PAGE?offset=$last&limit=1" | python3 -c \
            'import json,sys
try: print(json.load(sys.stdin)["items"][0]["positionInClusterQueue"])
except Exception: print(-1)')
        [[ "$got" == "$last" ]] && break
        sleep 2
    done
    [[ "$got" == "$last" ]] || { echo "run.sh: kuota never listed all $WORKLOADS Workloads" >&2; tail -20 "$WORK/kuota.log" >&2; exit 1; }
    for _ in $(seq 1 600); do
        done_=$($K get workloads -n kuota-bench -o json | python3 -c \
            'import json,sys; print(sum(1 for w in json.load(sys.stdin)["items"] if (w.get("status") or {}).get("conditions")))')
        [[ "$done_" -ge "$WORKLOADS" ]] && break
        sleep 15
    done
    echo "$1: all $WORKLOADS listed and given their pending status" >&2
}

# One curl, CLIENTS transfers at once, REQUESTS in all: per-request total time in seconds.
load() {
    local name=$1 url=$2; shift 2
    local cfg="$WORK/$name.curl"
    : > "$cfg"
    for _ in $(seq 1 "$REQUESTS"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$url" >> "$cfg"; done
    local t0 t1
    t0=$(date +%s.%N)
    curl -s --http1.1 --parallel --parallel-immediate --parallel-max "$CLIENTS" "$@" -w '%{http_code} %{time_total}\n' -K "$cfg" > "$WORK/$name.times"
    t1=$(date +%s.%N)
    python3 - "$name" "$WORK/$name.times" "$t0" "$t1" <<'PY'
import sys
name, path, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rows = [l.split() for l in open(path) if l.strip()]
bad = sum(1 for c, _ in rows if c != "200")
t = sorted(float(s) * 1000 for _, s in rows)
q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
print(f"{name:<34} n={len(t)} non-200={bad} p50={q(0.5):7.2f} ms p90={q(0.9):7.2f} ms "
      f"p99={q(0.99):7.2f} ms  {len(t) / (t1 - t0):6.1f} req/s")
PY
}
for bin in "$KUOTA_BIN" ${BASE_BIN:+"$BASE_BIN"}; do
    start_kuota "$bin"
    echo "== $bin: $REQUESTS requests, $CLIENTS at once, limit=$LIMIT"
    for round in 1 2 3; do
        echo "-- round $round"
        load "baseline-apiserver-discovery" "$SERVER/apis/kueue.x-k8s.io/v1beta2" "${ADMIN[@]}"
        load "via-apiserver-first-page" "$SERVER$PAGE?limit=$LIMIT" "${ADMIN[@]}"
        load "direct-first-page" "https://localhost:$PORT$PAGE?limit=$LIMIT" "${DIRECT[@]}"
        load "via-apiserver-last-page" "$SERVER$PAGE?limit=$LIMIT&offset=$((WORKLOADS - LIMIT))" "${ADMIN[@]}"
        load "direct-last-page" "https://localhost:$PORT$PAGE?limit=$LIMIT&offset=$((WORKLOADS - LIMIT))" "${DIRECT[@]}"
    done
    kill "$KUOTA_PID"; wait "$KUOTA_PID" 2>/dev/null || true
done
"$K8S" down >/dev/null 2>&1 || true
