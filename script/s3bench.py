#!/usr/bin/env python3
"""S3 benchmark of a running garage (or any S3 endpoint), with boto3.

Usage:
  script/s3bench.py --endpoint http://127.0.0.1:3900 --key GK... --secret ... [--quick]

Measures, in a fresh bucket:
  - 16-byte PUT and GET latency, one request at a time (median, p99);
  - 16-byte conditional PUT latency (If-None-Match: * on new keys, then
    If-Match on those keys), one at a time;
  - 1 MiB and 64 MiB PUT and GET throughput, 1 and 16 requests in flight;
  - time to first byte of a 10 MiB GET;
  - with --large-only: whole-body latency of a 10 MiB GET (and its time to
    first byte), and a 1 GiB multipart upload (boto3's transfer manager,
    8 MiB parts, 4 threads) and whole GET, in MB/s.
The client runs in this Python process (threads for concurrency): at high
throughput it can be the bottleneck; the numbers are what boto3 sees.
Every request loop is bounded in count.
"""
import argparse
import concurrent.futures as cf
import os
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
p.add_argument("--quick", action="store_true", help="fewer and smaller runs")
p.add_argument("--small-only", action="store_true", help="only the 16-byte latencies")
p.add_argument("--large-only", action="store_true",
               help="only large objects: 10 MiB GET latency, 1 GiB multipart PUT and GET")
a = p.parse_args()

# With --large-only, checksums only where S3 requires them: the client's
# CRC of every GiB is not what is measured, and the reference system's
# checksum of a multipart object fails boto3's check of a whole GET.
extra = ({"request_checksum_calculation": "when_required",
          "response_checksum_validation": "when_required"} if a.large_only else {})
s3 = boto3.client(
    "s3", endpoint_url=a.endpoint, aws_access_key_id=a.key, aws_secret_access_key=a.secret,
    region_name=a.region,
    config=Config(max_pool_connections=32, retries={"max_attempts": 1},
                  s3={"addressing_style": "path"}, **extra),
)
bucket = "bench-" + uuid.uuid4().hex[:8]
s3.create_bucket(Bucket=bucket)
MIB = 1 << 20


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1)))]


def small_latency(n):
    body = b"x" * 16
    puts, gets = [], []
    for i in range(n):
        t = time.perf_counter()
        s3.put_object(Bucket=bucket, Key=f"small/{i}", Body=body)
        puts.append(time.perf_counter() - t)
    for i in range(n):
        t = time.perf_counter()
        s3.get_object(Bucket=bucket, Key=f"small/{i}")["Body"].read()
        gets.append(time.perf_counter() - t)
    etags, cputs, mputs = [], [], []
    for i in range(n):
        t = time.perf_counter()
        r = s3.put_object(Bucket=bucket, Key=f"cond/{i}", Body=body, IfNoneMatch="*")
        cputs.append(time.perf_counter() - t)
        etags.append(r["ETag"])
    for i in range(n):
        t = time.perf_counter()
        s3.put_object(Bucket=bucket, Key=f"cond/{i}", Body=body + b"!", IfMatch=etags[i])
        mputs.append(time.perf_counter() - t)
    for name, v in (("PUT", puts), ("GET", gets), ("PUT If-None-Match: *", cputs),
                    ("PUT If-Match", mputs)):
        print(f"16 B {name}, 1 at a time, {n} requests: median {statistics.median(v) * 1e3:.2f} ms, "
              f"p99 {pct(v, 0.99) * 1e3:.2f} ms", flush=True)


def throughput(size, inflight, count):
    data = os.urandom(size)
    keys = [f"tp/{size}/{inflight}/{i}" for i in range(count)]
    with cf.ThreadPoolExecutor(inflight) as ex:
        t = time.perf_counter()
        list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=data), keys))
        put = time.perf_counter() - t
        t = time.perf_counter()
        sizes = list(ex.map(lambda k: len(s3.get_object(Bucket=bucket, Key=k)["Body"].read()), keys))
        get = time.perf_counter() - t
    assert all(s == size for s in sizes)
    total = size * count / 1e6
    print(f"{size // MIB} MiB objects, {inflight} in flight, {count} objects: "
          f"PUT {total / put:.0f} MB/s, GET {total / get:.0f} MB/s", flush=True)
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})


def ttfb(n):
    s3.put_object(Bucket=bucket, Key="ttfb", Body=os.urandom(10 * MIB))
    v = []
    for _ in range(n):
        t = time.perf_counter()
        body = s3.get_object(Bucket=bucket, Key="ttfb")["Body"]
        body.read(1)
        v.append(time.perf_counter() - t)
        body.read()
    print(f"10 MiB GET, time to first byte, {n} requests: median {statistics.median(v) * 1e3:.2f} ms, "
          f"p99 {pct(v, 0.99) * 1e3:.2f} ms", flush=True)


def large(n, big_runs):
    data = os.urandom(10 * MIB)
    s3.put_object(Bucket=bucket, Key="large/10", Body=data)
    whole, first = [], []
    for _ in range(n):
        t = time.perf_counter()
        body = s3.get_object(Bucket=bucket, Key="large/10")["Body"]
        got = body.read(1)
        first.append(time.perf_counter() - t)
        got += body.read()
        whole.append(time.perf_counter() - t)
        assert got == data
    for name, v in (("whole body", whole), ("time to first byte", first)):
        print(f"10 MiB GET, {name}, {n} requests: median {statistics.median(v) * 1e3:.2f} ms, "
              f"p99 {pct(v, 0.99) * 1e3:.2f} ms", flush=True)
    import io
    from boto3.s3.transfer import TransferConfig
    cfg = TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB, max_concurrency=4)
    big = os.urandom(1 << 30)
    for r in range(big_runs):
        t = time.perf_counter()
        s3.upload_fileobj(io.BytesIO(big), bucket, "large/1g", Config=cfg)
        put = time.perf_counter() - t
        t = time.perf_counter()
        body = s3.get_object(Bucket=bucket, Key="large/1g")["Body"]
        n_read = 0
        while True:
            chunk = body.read(8 * MIB)
            if not chunk:
                break
            n_read += len(chunk)
        get = time.perf_counter() - t
        assert n_read == len(big)
        print(f"1 GiB, run {r + 1}: multipart PUT {len(big) / put / 1e6:.0f} MB/s, "
              f"GET {len(big) / get / 1e6:.0f} MB/s", flush=True)


q = a.quick
if a.large_only:
    large(10 if q else 30, 1 if q else 3)
    raise SystemExit(0)
small_latency(50 if q else 500)
if a.small_only:
    raise SystemExit(0)
for size, inflight, count in [(MIB, 1, 16 if q else 64), (MIB, 16, 32 if q else 256),
                              (64 * MIB, 1, 2 if q else 4), (64 * MIB, 16, 16 if q else 32)]:
    throughput(size, inflight, count)
ttfb(10 if q else 50)
