#!/usr/bin/env python3
"""Large multipart uploads against a running S3 endpoint, with boto3.

Usage:
  script/bench-multipart.py --endpoint http://127.0.0.1:3910 --key GK... --secret ... \
      [--parts 100,1000,10000] [--part-size-mib 5] [--threads 4] [--no-get] [--copy]

For each part count N: one upload of N parts, --threads parts in flight,
every part the same bytes (one random MiB repeated: the blocks are stored
once, so 10 000 parts of 5 MiB fit on a small disk; the network, hashing
and metadata work per part are those of distinct parts). Prints:
  - the median and p90 latency of the first and of the last 10 % of the
    parts (a per-part cost that grows with the upload shows as last > first),
    and the upload's throughput;
  - ListParts of the first 1 000 parts, then CompleteMultipartUpload, in
    seconds;
  - a whole GET of the object (read and dropped), in MiB/s (unless --no-get).
With --copy, each part is an UploadPartCopy of one object of the part's
size (no data sent: where the system can, the part shares the source's
blocks), which measures the metadata side of large uploads (ListParts,
CompleteMultipartUpload over 10 000 parts) in a minute rather than the
ten that 50 GB of part bodies take.
With --part-size-mib below 5 the upload cannot be completed (S3's minimum
part size): only the part latencies are measured, then it is aborted.
The client runs in this process; the numbers are what boto3 sees. Every
loop is bounded by N.
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
p.add_argument("--parts", default="100,1000,10000")
p.add_argument("--part-size-mib", type=float, default=5)
p.add_argument("--threads", type=int, default=4)
p.add_argument("--no-get", action="store_true")
p.add_argument("--copy", action="store_true", help="parts by UploadPartCopy of one object")
a = p.parse_args()

s3 = boto3.client(
    "s3", endpoint_url=a.endpoint, aws_access_key_id=a.key, aws_secret_access_key=a.secret,
    region_name=a.region,
    config=Config(max_pool_connections=max(8, 2 * a.threads), retries={"max_attempts": 1},
                  read_timeout=600,
                  request_checksum_calculation="when_required",
                  response_checksum_validation="when_required",
                  s3={"addressing_style": "path"}),
)
MIB = 1 << 20
part_size = int(a.part_size_mib * MIB)
block = os.urandom(MIB)
body = (block * (part_size // MIB + 1))[:part_size]
bucket = "mpu-" + uuid.uuid4().hex[:8]
s3.create_bucket(Bucket=bucket)
if a.copy:
    s3.put_object(Bucket=bucket, Key="source", Body=body)


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1)))]


def run(n):
    key = f"big-{n}"
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    lat = [0.0] * n
    etags = [None] * n

    def one(i):
        t = time.perf_counter()
        if a.copy:
            r = s3.upload_part_copy(Bucket=bucket, Key=key, UploadId=up, PartNumber=i + 1,
                                    CopySource={"Bucket": bucket, "Key": "source"})
            etags[i] = r["CopyPartResult"]["ETag"]
        else:
            r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=i + 1, Body=body)
            etags[i] = r["ETag"]
        lat[i] = time.perf_counter() - t

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(a.threads) as ex:
        for f in cf.as_completed([ex.submit(one, i) for i in range(n)]):
            f.result()
    upload_s = time.perf_counter() - t0
    tenth = max(1, n // 10)
    first, last = lat[:tenth], lat[-tenth:]
    how = "copied" if a.copy else "sent"
    print(f"{n} parts of {a.part_size_mib:g} MiB ({how}), {a.threads} in flight: "
          f"{n * part_size / MIB / upload_s:.1f} MiB/s, {upload_s:.1f} s")
    print(f"  part latency, first 10 %: median {statistics.median(first) * 1e3:.1f} ms, "
          f"p90 {pct(first, 0.9) * 1e3:.1f} ms; last 10 %: median "
          f"{statistics.median(last) * 1e3:.1f} ms, p90 {pct(last, 0.9) * 1e3:.1f} ms")
    t = time.perf_counter()
    listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=up, MaxParts=1000)
    print(f"  ListParts (first {len(listed.get('Parts', []))}): {time.perf_counter() - t:.3f} s")
    if part_size < 5 * MIB:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=up)
        return
    parts = [{"PartNumber": i + 1, "ETag": etags[i]} for i in range(n)]
    t = time.perf_counter()
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up,
                                 MultipartUpload={"Parts": parts})
    print(f"  CompleteMultipartUpload: {time.perf_counter() - t:.3f} s")
    if a.no_get:
        return
    t = time.perf_counter()
    got = 0
    stream = s3.get_object(Bucket=bucket, Key=key)["Body"]
    for chunk in stream.iter_chunks(8 * MIB):
        got += len(chunk)
    s = time.perf_counter() - t
    if got != n * part_size:
        raise SystemExit(f"GET returned {got} bytes, expected {n * part_size}")
    print(f"  GET: {got / MIB / s:.1f} MiB/s ({s:.1f} s)")
    s3.delete_object(Bucket=bucket, Key=key)


for n in [int(x) for x in a.parts.split(",")]:
    run(n)
