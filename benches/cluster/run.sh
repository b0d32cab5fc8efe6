#!/usr/bin/env bash
# kuota against a real API server (Kueue's baseline shape), by hand, not in CI.
#
#   K8S=/path/to/k8s/cluster benches/cluster/run.sh [-- bench args, e.g. --jobs 10000]
#
# K8S is a `cluster` script that starts a throwaway control plane (kube-apiserver, etcd,
# kube-controller-manager; see docs/performance.md) and honours KUOTA_K8S_DIR and
# KUOTA_K8S_APISERVER_ARGS. The API server is (re)started with an audit log of writes so
# the benchmark can count kuota's writes; the log is deleted at the end.
# KUOTA_BIN=... measures another kuota binary than the one built here.
set -euo pipefail
cd "$(dirname "$0")/../.."

K8S=${K8S:?set K8S to the control plane script (cluster up/down/env)}
export KUOTA_K8S_DIR=${KUOTA_K8S_DIR:-${TMPDIR:-/tmp}/kuota-k8s-bench}
AUDIT_LOG="$KUOTA_K8S_DIR/logs/audit.jsonl"
mkdir -p "$KUOTA_K8S_DIR/logs"
cp benches/cluster/audit-policy.yaml "$KUOTA_K8S_DIR/audit-policy.yaml"
# kube-controller-manager's own client defaults to 20 QPS: the Job controller would then
# create the admitted Jobs' Pods (and the stand-in kubelet's finishes would complete them)
# more slowly than kuota admits, and the run would measure the controller manager.
export KUOTA_K8S_KCM_ARGS="--kube-api-qps=1000 --kube-api-burst=2000 --concurrent-job-syncs=50 --concurrent-gc-syncs=50 ${KUOTA_K8S_KCM_ARGS:-}"
export KUOTA_K8S_APISERVER_ARGS="--audit-policy-file=$KUOTA_K8S_DIR/audit-policy.yaml --audit-log-path=$AUDIT_LOG --audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=0 --max-requests-inflight=800 --max-mutating-requests-inflight=400 ${KUOTA_K8S_APISERVER_ARGS:-}"

# A fresh API server so it picks up the audit flags, on an empty etcd: the Jobs of an
# earlier run, whose namespaces are still terminating, would otherwise be reconciled (and
# their refused Workload creates counted) in this one.
"$K8S" down --wipe >/dev/null 2>&1 || true
rm -f "$AUDIT_LOG"
eval "$("$K8S" up)"
# KUOTA_BENCH_KEEP_AUDIT=1 keeps the audit log for a closer look (it grows by ~10 KB a Job).
[[ -n "${KUOTA_BENCH_KEEP_AUDIT:-}" ]] || trap 'rm -f "$AUDIT_LOG"' EXIT

# kuota and the harness in one build: `cargo bench` after `cargo build --release` would
# compile the kuota library a second time (the harness's dev-dependencies change its
# features), some eight minutes on two cores.
build="$(cargo build --release --bin kuota --bench cluster --message-format=json-render-diagnostics)"
KUOTA_BIN=${KUOTA_BIN:-${CARGO_TARGET_DIR:-target}/release/kuota}
bench_bin="$(grep '"name":"cluster"' <<<"$build" | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -n 1)"
[[ -x "$bench_bin" ]] || { echo "run.sh: the cluster bench was not built" >&2; exit 1; }
[[ "${1:-}" == "--" ]] && shift
"$bench_bin" --bench --kuota "$KUOTA_BIN" --audit-log "$AUDIT_LOG" "$@"
