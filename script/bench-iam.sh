#!/usr/bin/env bash
# What an IAM identity costs per request (issue 49): one node from the
# built-in configuration, script/s3bench.py --small-only (16-byte PUT and
# GET latency, one at a time) with a key of its own (`garage key`, its
# flags) and then with an IAM user's key whose identity is resolved on
# every request (AdministratorAccess attached, NPOLICIES inline policies
# with conditions, in NGROUPS groups with one policy each).
#
#   script/bench-iam.sh                          # debug build
#   BIN=target/release/garage script/bench-iam.sh
#   NPOLICIES=10 NGROUPS=5 script/bench-iam.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BIN="${BIN:-target/debug/garage}"
NPOLICIES="${NPOLICIES:-3}"
NGROUPS="${NGROUPS:-2}"
[ -x "$BIN" ] || cargo build
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
"$root/$BIN" server >server.out 2>server.log &
pid=$!
for _ in $(seq 1 60); do
    grep -q "AWS_SECRET_ACCESS_KEY=" server.out 2>/dev/null && break
    sleep 1
done
line=$(grep -o "AWS_ACCESS_KEY_ID=[^ ]* AWS_SECRET_ACCESS_KEY=[^ ]*" server.out | head -1)
key=$(echo "$line" | sed 's/AWS_ACCESS_KEY_ID=\([^ ]*\).*/\1/')
secret=$(echo "$line" | sed 's/.*AWS_SECRET_ACCESS_KEY=//')
ep=http://127.0.0.1:3900
g() { "$root/$BIN" iam "$@"; }
g create-user --user-name bench >/dev/null
g attach-user-policy --user-name bench --policy-arn arn:aws:iam::aws:policy/AdministratorAccess
for i in $(seq 1 "$NPOLICIES"); do
    g put-user-policy --user-name bench --policy-name "p$i" --policy-document \
        '{"Statement":[{"Effect":"Deny","Action":"s3:DeleteBucket","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"192.0.2.0/24"},"StringLike":{"aws:UserAgent":"nothing-*"}}}]}'
done
for i in $(seq 1 "$NGROUPS"); do
    g create-group --group-name "g$i" >/dev/null
    g put-group-policy --group-name "g$i" --policy-name gp --policy-document \
        '{"Statement":[{"Effect":"Allow","Action":"s3:Get*","Resource":"arn:aws:s3:::*/${aws:username}/*"}]}'
    g add-user-to-group --group-name "g$i" --user-name bench
done
iam=$(g create-access-key --user-name bench)
ikey=$(echo "$iam" | python3 -c 'import json,sys; print(json.load(sys.stdin)["AccessKey"]["AccessKeyId"])')
isecret=$(echo "$iam" | python3 -c 'import json,sys; print(json.load(sys.stdin)["AccessKey"]["SecretAccessKey"])')
echo "== a key of its own ($key)"
python3 "$root/script/s3bench.py" --endpoint "$ep" --key "$key" --secret "$secret" --small-only
echo "== an IAM user's key ($ikey: AdministratorAccess, $NPOLICIES inline policies, $NGROUPS groups)"
python3 "$root/script/s3bench.py" --endpoint "$ep" --key "$ikey" --secret "$isecret" --small-only
