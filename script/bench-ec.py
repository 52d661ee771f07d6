#!/usr/bin/env python3
"""Storage classes side by side on one running cluster, with boto3.

Usage:
  script/bench-ec.py --endpoint URL --key GK... --secret ... --data 'DIR/n*/data' \
      [--objects 16] [--size-mib 8] [--phase write|read]

`write`: for each class (STANDARD, STANDARD_IA), PUTs `--objects` objects
of `--size-mib` MiB of random data, 4 requests in flight, and prints the
throughput and the bytes the data directories grew by per byte stored
(after waiting for the background copies to land, at most 60 s).
`read`: GETs every object of each class (4 in flight) and prints the
throughput, and the median latency of a whole 1 MiB GET, one at a time.
Every loop is bounded in count; the client runs in this process.
"""
import argparse
import concurrent.futures as cf
import glob
import os
import statistics
import time

import boto3
from botocore.client import Config

p = argparse.ArgumentParser()
p.add_argument("--endpoint", required=True)
p.add_argument("--key", required=True)
p.add_argument("--secret", required=True)
p.add_argument("--data", required=True, help="glob of the nodes' data dirs")
p.add_argument("--objects", type=int, default=16)
p.add_argument("--size-mib", type=int, default=8)
p.add_argument("--phase", choices=["write", "read"], default="write")
p.add_argument("--bucket", default="bench-ec")
a = p.parse_args()

s3 = boto3.client(
    "s3",
    endpoint_url=a.endpoint,
    aws_access_key_id=a.key,
    aws_secret_access_key=a.secret,
    region_name="garage",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                  max_pool_connections=16),
)
CLASSES = ["STANDARD", "STANDARD_IA"]
size = a.size_mib << 20


def disk():
    total = 0
    for d in glob.glob(a.data):
        for root, _, files in os.walk(d):
            for f in files:
                if ".tmp" in f or ".corrupted" in f:
                    continue
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except FileNotFoundError:
                    pass
    return total


def timed(n, f):
    t = time.monotonic()
    with cf.ThreadPoolExecutor(4) as ex:
        list(ex.map(f, range(n)))
    return time.monotonic() - t


if a.phase == "write":
    try:
        s3.create_bucket(Bucket=a.bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    s3.put_object(Bucket=a.bucket, Key="small", Body=os.urandom(1 << 20))
    s3.put_object(Bucket=a.bucket, Key="small-ia", Body=os.urandom(1 << 20),
                  StorageClass="STANDARD_IA")
    for cls in CLASSES:
        before = disk()

        # Distinct random bodies: identical blocks would be stored once.
        bodies = [os.urandom(size + 8) for _ in range(a.objects)]

        def put(i, cls=cls):
            s3.put_object(Bucket=a.bucket, Key=f"{cls}/{i}", Body=bodies[i],
                          StorageClass=cls)

        secs = timed(a.objects, put)
        stored = a.objects * (size + 8)
        mbs = stored / secs / 1e6
        # Replicated PUTs are acknowledged with 2 copies of 3: wait for the third.
        want = 2.9 if cls == "STANDARD" else 1.5
        for _ in range(120):
            if disk() - before >= want * stored:
                break
            time.sleep(0.5)
        ratio = (disk() - before) / stored
        print(f"{cls:12} PUT {a.objects} x {a.size_mib} MiB: {mbs:7.1f} MB/s; "
              f"on disk per byte stored: {ratio:.4f}")
else:
    for cls in CLASSES:
        def get(i, cls=cls):
            b = s3.get_object(Bucket=a.bucket, Key=f"{cls}/{i}")["Body"].read()
            assert len(b) == size + 8, (cls, i, len(b))

        secs = timed(a.objects, get)
        mbs = a.objects * (size + 8) / secs / 1e6
        key = "small" if cls == "STANDARD" else "small-ia"
        lat = []
        for _ in range(20):
            t = time.monotonic()
            s3.get_object(Bucket=a.bucket, Key=key)["Body"].read()
            lat.append((time.monotonic() - t) * 1000)
        print(f"{cls:12} GET {a.objects} x {a.size_mib} MiB: {mbs:7.1f} MB/s; "
              f"1 MiB GET median {statistics.median(lat):.1f} ms")
