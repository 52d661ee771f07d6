#!/usr/bin/env python3
"""Many versions of one key, with boto3, against a running garage.

Usage:
  script/bench_versions.py --endpoint http://127.0.0.1:3900 --key GK... --secret ... \
      [--versions 100000] [--threads 16]

In a fresh bucket with versioning enabled, writes --versions PUTs of one
key (16 bytes each, --threads at once), then:
  - lists every version with ListObjectVersions, 1000 per page, checking
    that each version is listed once, newest first, and timing each page;
  - reads the current version and one from the middle by version id,
    timing them;
and prints the numbers. Every request loop is bounded in count.
"""
import argparse
import concurrent.futures as cf
import statistics
import time
import uuid

import boto3
from botocore.client import Config

p = argparse.ArgumentParser()
p.add_argument("--endpoint", required=True)
p.add_argument("--key", required=True)
p.add_argument("--secret", required=True)
p.add_argument("--region", default="garage")
p.add_argument("--versions", type=int, default=100_000)
p.add_argument("--threads", type=int, default=16)
a = p.parse_args()

s3 = boto3.client(
    "s3", endpoint_url=a.endpoint, aws_access_key_id=a.key, aws_secret_access_key=a.secret,
    region_name=a.region,
    config=Config(max_pool_connections=64, retries={"max_attempts": 1},
                  s3={"addressing_style": "path"}),
)
bucket = "bench-versions-" + uuid.uuid4().hex[:8]
s3.create_bucket(Bucket=bucket)
s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
for _ in range(600):
    if s3.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled":
        break
    time.sleep(0.05)

t0 = time.monotonic()
with cf.ThreadPoolExecutor(a.threads) as ex:
    ids = list(ex.map(lambda i: s3.put_object(Bucket=bucket, Key="k", Body=b"%016d" % i)["VersionId"],
                      range(a.versions)))
put_s = time.monotonic() - t0
print(f"{a.versions} PUTs of one key: {put_s:.1f} s ({a.versions / put_s:.0f}/s, {a.threads} at once)")

pages = []
seen = []
marker = {}
t0 = time.monotonic()
for _ in range(a.versions // 1000 + 2):
    t = time.monotonic()
    res = s3.list_object_versions(Bucket=bucket, Prefix="k", MaxKeys=1000, **marker)
    pages.append(time.monotonic() - t)
    seen += [(v["VersionId"], v["LastModified"]) for v in res.get("Versions", [])]
    if not res["IsTruncated"]:
        break
    marker = {"KeyMarker": res["NextKeyMarker"], "VersionIdMarker": res["NextVersionIdMarker"]}
list_s = time.monotonic() - t0
assert len(seen) == a.versions, (len(seen), a.versions)
assert len({v for v, _ in seen}) == a.versions, "a version listed twice"
assert set(v for v, _ in seen) == set(ids), "listed versions differ from written ones"
assert all(seen[i][1] >= seen[i + 1][1] for i in range(len(seen) - 1)), "not newest first"
print(f"listed {len(seen)} versions in {len(pages)} pages: {list_s:.1f} s; "
      f"page median {statistics.median(pages) * 1000:.0f} ms, max {max(pages) * 1000:.0f} ms")

for what, kw in [("current", {}), ("middle, by id", {"VersionId": ids[len(ids) // 2]})]:
    times = []
    for _ in range(20):
        t = time.monotonic()
        s3.get_object(Bucket=bucket, Key="k", **kw)["Body"].read()
        times.append(time.monotonic() - t)
    print(f"GET {what}: median {statistics.median(times) * 1000:.1f} ms")
