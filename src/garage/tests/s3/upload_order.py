#!/usr/bin/env python3
"""The last write to complete wins (issue 28): a large PUT of "B" starts
(through a presigned URL, its body sent by hand), then a PUT of "A" to the
same key starts and completes, then "B" completes: "B" is what GET returns,
through both nodes, byte for byte. In a bucket with versioning too, where
both versions are listed, "B" current and newest.

usage: upload_order.py KEY_ID SECRET ENDPOINT_A ENDPOINT_B
Prints "upload order ok".
"""

import http.client
import sys
import urllib.parse

from s3util import client

SIZE = 5 * 1024 * 1024 + 777


def slow_put(cl, endpoint, bucket, key, data, meanwhile):
    """PUTs `data` through a presigned URL: sends the first 2 MiB, runs
    `meanwhile`, then sends the rest; returns (status, headers)."""
    url = cl.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600)
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    conn.putrequest("PUT", u.path + "?" + u.query, skip_accept_encoding=True)
    conn.putheader("Content-Length", str(len(data)))
    conn.endheaders()
    head = 2 * 1024 * 1024
    conn.send(data[:head])
    meanwhile()
    conn.send(data[head:])
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status, dict(r.getheaders())


def main():
    key_id, secret, ep_a, ep_b = sys.argv[1:5]
    a, b = client(ep_a, key_id, secret), client(ep_b, key_id, secret)
    a.create_bucket(Bucket="uploads")
    a.create_bucket(Bucket="uploads-v")
    a.put_bucket_versioning(Bucket="uploads-v", VersioningConfiguration={"Status": "Enabled"})
    for bucket in ["uploads", "uploads-v"]:
        for n in range(2):
            k = f"race/{n}"
            big = (f"B {bucket} {k} ".encode() * (SIZE // 10 + 1))[:SIZE]
            small = f"A {bucket} {k}".encode()
            put_a = {}

            def write_a():
                put_a.update(b.put_object(Bucket=bucket, Key=k, Body=small))

            status, headers = slow_put(a, ep_a, bucket, k, big, write_a)
            assert status == 200, f"{bucket}/{k}: the large PUT answered {status}"
            assert "ETag" in put_a
            for name, cl in [("A", a), ("B", b)]:
                got = cl.get_object(Bucket=bucket, Key=k)["Body"].read()
                assert got == big, (
                    f"{bucket}/{k} through node {name}: {got[:20]!r} ({len(got)} bytes), "
                    "expected the large upload, which completed last")
            if bucket == "uploads-v":
                vb = headers.get("x-amz-version-id")
                va = put_a["VersionId"]
                vs = a.list_object_versions(Bucket=bucket, Prefix=k).get("Versions", [])
                got = [(v["VersionId"], v["IsLatest"], v["Size"]) for v in vs]
                want = [(vb, True, SIZE), (va, False, len(small))]
                assert got == want, f"{bucket}/{k}: versions {got}, expected {want}"
    print("upload order ok")


if __name__ == "__main__":
    main()
