#!/usr/bin/env bash
# Checks the Helm chart (run by .ci/run; needs Go and the Go module proxy):
# `helm lint`, `helm template` with the default values and with
# garage/ci/non-default-values.yaml, and every rendered manifest validated
# against the Kubernetes API types by ./validate. helm itself is built from
# its Go module (tools/go.mod pins the version), as is the validator.
set -euo pipefail
cd "$(dirname "$0")"

log() { echo "== $*"; }

log "building helm and the manifest validator (Go modules)"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd tools && go build -buildvcs=false -o "$bin/helm" helm.sh/helm/v3/cmd/helm)
(cd validate && go vet ./... && go build -buildvcs=false -o "$bin/validate" .)
"$bin/helm" version --short

log "helm lint"
"$bin/helm" lint garage
"$bin/helm" lint garage -f garage/ci/non-default-values.yaml

render() {
    "$bin/helm" template garage garage --namespace storage "$@"
}

for values in "" "garage/ci/non-default-values.yaml"; do
    args=()
    [ -n "$values" ] && args=(-f "$values")
    log "helm template ${values:-(default values)} | validate"
    render "${args[@]}" | "$bin/validate"
done
log "helm template --set layout.zoneFrom=topology | validate"
render --set layout.zoneFrom=topology | "$bin/validate"
if ! render --set layout.zoneFrom=topology | grep -qF "fieldPath: metadata.labels['topology.kubernetes.io/zone']"; then
    echo "error: zoneFrom=topology does not give the pods their zone label" >&2
    exit 1
fi

# Values the chart must refuse, with a message naming the value.
refuse() {
    local want=$1; shift
    if out=$(render "$@" 2>&1); then
        echo "error: helm template $* succeeded; it must fail with: $want" >&2
        exit 1
    fi
    if ! grep -q -- "$want" <<<"$out"; then
        echo "error: helm template $* failed without saying \"$want\":" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "refused as expected: $*"
}
refuse "cannot exceed replicaCount" --set replicaCount=2 --set garage.replicationFactor=3
refuse "dbEngine is lmdb or sqlite" --set garage.dbEngine=rocksdb
refuse "needs at least one zone" --set 'layout.zones=null'
refuse "zoneFrom is ordinal or topology" --set layout.zoneFrom=racks

# What the rendering must contain (the validator checks the form; these,
# a few facts of the content).
out=$(render --set replicaCount=4)
for want in \
    '"garage-0.garage-headless:3901",' \
    '"garage-3.garage-headless:3901",' \
    'readOnlyRootFilesystem: true' \
    'runAsNonRoot: true' \
    'path: /health' \
    'key: rpc-secret' \
    'helm.sh/hook: post-install,post-upgrade'; do
    if ! grep -qF -- "$want" <<<"$out"; then
        echo "error: the default rendering lacks: $want" >&2
        exit 1
    fi
done
if grep -q "kind: ServiceMonitor\|kind: Ingress" <<<"$out"; then
    echo "error: ServiceMonitor and Ingress are off by default" >&2
    exit 1
fi
log "helm chart: ok"
