#!/usr/bin/env python3
"""Sequential writes through two nodes whose clocks may disagree: every
write acknowledged after another one of the same key must win over it
(issue 28). One client, one request at a time, each waiting for the
previous answer; every check is made in both directions (first write
through A and the next through B, then the reverse).

usage: clock_order.py KEY_ID SECRET BUCKET VERSIONED_BUCKET ROUND ENDPOINT_A ENDPOINT_B

Checks, for each direction:
- PUT then PUT (small, inline): the second body is read back through
  both nodes;
- PUT small then PUT of several blocks, and the reverse: the second body,
  byte for byte;
- PUT then DELETE: NoSuchKey through both nodes;
- PUT then DeleteObjects: NoSuchKey;
- PUT then CopyObject onto it: the copied body;
- an upload in progress, a PUT and a DELETE of its key, a part, then
  CompleteMultipartUpload: the upload's body (as S3); completed again
  (a retry): the same ETag; no longer listed;
- a lock taken with If-None-Match: *, refused (412) through the other
  node while held, released by a DELETE through it, can be taken again,
  whichever node's clock is off (CLOCK_OFF=1: node B's);
- in a bucket with versioning: PUT, PUT, the second is current and the
  listing shows exactly the two versions, newest first; a DELETE makes a
  delete marker current.
Prints each anomaly, then "anomalies: N"; exits 1 if N > 0.
"""

import os
import sys

from botocore.exceptions import ClientError

from s3util import client

BIG = 2 * 1024 * 1024 + 12345


def body(tag, size=None):
    data = f"{tag}|".encode()
    if size is None:
        return data
    return (data * (size // len(data) + 1))[:size]


def main():
    key_id, secret, bucket, vbucket, rnd = sys.argv[1:6]
    eps = sys.argv[6:8]
    c = [client(ep, key_id, secret) for ep in eps]
    clock_off = os.environ.get("CLOCK_OFF") == "1"
    anomalies = []

    def get(cl, b, k):
        try:
            return cl.get_object(Bucket=b, Key=k)["Body"].read()
        except ClientError as e:
            if e.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise

    def expect(what, b, k, want):
        for i, cl in enumerate(c):
            got = get(cl, b, k)
            if got != want:
                show = lambda x: None if x is None else (x[:24], len(x))
                anomalies.append(f"{what}: GET {k} through node {'AB'[i]}: {show(got)}, expected {show(want)}")

    for d, (w1, w2) in enumerate([(c[0], c[1]), (c[1], c[0])]):
        p = f"r{rnd}/d{d}"
        # PUT then PUT.
        for n in range(3):
            k = f"{p}/put-put/{n}"
            w1.put_object(Bucket=bucket, Key=k, Body=body(f"{k} first"))
            w2.put_object(Bucket=bucket, Key=k, Body=body(f"{k} second"))
            expect("PUT then PUT", bucket, k, body(f"{k} second"))
        # Small then big, big then small.
        k = f"{p}/small-big"
        w1.put_object(Bucket=bucket, Key=k, Body=body(f"{k} first"))
        w2.put_object(Bucket=bucket, Key=k, Body=body(f"{k} second", BIG))
        expect("PUT small then PUT big", bucket, k, body(f"{k} second", BIG))
        k = f"{p}/big-small"
        w1.put_object(Bucket=bucket, Key=k, Body=body(f"{k} first", BIG))
        w2.put_object(Bucket=bucket, Key=k, Body=body(f"{k} second"))
        expect("PUT big then PUT small", bucket, k, body(f"{k} second"))
        # PUT then DELETE.
        for n in range(2):
            k = f"{p}/put-delete/{n}"
            w1.put_object(Bucket=bucket, Key=k, Body=body(k))
            w2.delete_object(Bucket=bucket, Key=k)
            expect("PUT then DELETE", bucket, k, None)
        # PUT then DeleteObjects.
        k = f"{p}/put-deleteobjects"
        w1.put_object(Bucket=bucket, Key=k, Body=body(k))
        r = w2.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k}]})
        if r.get("Errors"):
            anomalies.append(f"DeleteObjects {k}: {r['Errors']}")
        expect("PUT then DeleteObjects", bucket, k, None)
        # PUT then CopyObject onto it.
        k, src = f"{p}/put-copy", f"{p}/copy-source"
        w1.put_object(Bucket=bucket, Key=src, Body=body(src, BIG))
        w1.put_object(Bucket=bucket, Key=k, Body=body(f"{k} first"))
        w2.copy_object(Bucket=bucket, Key=k, CopySource={"Bucket": bucket, "Key": src})
        expect("PUT then CopyObject", bucket, k, body(src, BIG))
        # An upload survives a PUT and a DELETE of its key made while it
        # is in progress (as S3), takes a part after them, and completes
        # as the newest version; a retried completion (its answer lost)
        # answers the same, and the upload is no longer listed.
        k = f"{p}/put-mpu"
        up = w2.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]
        w1.put_object(Bucket=bucket, Key=k, Body=body(f"{k} first"))
        w1.delete_object(Bucket=bucket, Key=k)
        part = w2.upload_part(Bucket=bucket, Key=k, UploadId=up, PartNumber=1,
                              Body=body(f"{k} part", BIG))
        parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
        done = w2.complete_multipart_upload(Bucket=bucket, Key=k, UploadId=up,
                                            MultipartUpload=parts)
        expect("PUT and DELETE during an upload, then CompleteMultipartUpload",
               bucket, k, body(f"{k} part", BIG))
        again = w1.complete_multipart_upload(Bucket=bucket, Key=k, UploadId=up,
                                             MultipartUpload=parts)
        if again["ETag"] != done["ETag"]:
            anomalies.append(f"{k}: a retried completion answered {again['ETag']}, "
                             f"the first {done['ETag']}")
        listed = w1.list_multipart_uploads(Bucket=bucket, Prefix=k).get("Uploads", [])
        if listed:
            anomalies.append(f"{k}: the completed upload is still listed: {listed}")
        k = f"{p}/mpu-after-put"
        w1.put_object(Bucket=bucket, Key=k, Body=body(f"{k} first"))
        up = w2.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]
        part = w2.upload_part(Bucket=bucket, Key=k, UploadId=up, PartNumber=1,
                              Body=body(f"{k} part", BIG))
        w2.complete_multipart_upload(
            Bucket=bucket, Key=k, UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        expect("PUT then CompleteMultipartUpload", bucket, k, body(f"{k} part", BIG))
        # A lock taken, refused through the other node while held,
        # released through it, taken again. Nothing in a conditional write
        # depends on a clock (in a cluster finalized at v0.3.0 register
        # values never void by age), so a node whose clock is off the
        # cluster's (CLOCK_OFF=1: node B) takes part like any other.
        k = f"{p}/lock"
        step = "take"
        try:
            w1.put_object(Bucket=bucket, Key=k, Body=b"held", IfNoneMatch="*")
            step = "take while held"
            try:
                w2.put_object(Bucket=bucket, Key=k, Body=b"taken twice", IfNoneMatch="*")
                anomalies.append(f"lock {k}: taken through both nodes (clock off: {clock_off})")
            except ClientError as e:
                if e.response["Error"]["Code"] != "PreconditionFailed":
                    anomalies.append(f"lock {k}: the second taker got {e}, expected 412")
            step = "release"
            w2.delete_object(Bucket=bucket, Key=k)
            step = "take again"
            w1.put_object(Bucket=bucket, Key=k, Body=b"held again", IfNoneMatch="*")
        except ClientError as e:
            anomalies.append(f"lock {k}, {step} (first writer through node {'AB'[c.index(w1)]}): {e}")
        expect("lock re-taken", bucket, k, b"held again")
        # Versioned: PUT, PUT, DELETE.
        k = f"{p}/versions"
        v1 = w1.put_object(Bucket=vbucket, Key=k, Body=body(f"{k} v1"))["VersionId"]
        v2 = w2.put_object(Bucket=vbucket, Key=k, Body=body(f"{k} v2"))["VersionId"]
        expect("versioned PUT then PUT", vbucket, k, body(f"{k} v2"))
        for i, cl in enumerate(c):
            vs = cl.list_object_versions(Bucket=vbucket, Prefix=k).get("Versions", [])
            got = [(v["VersionId"], v["IsLatest"]) for v in vs]
            if got != [(v2, True), (v1, False)]:
                anomalies.append(f"versions of {k} through node {'AB'[i]}: {got}, expected {[(v2, True), (v1, False)]}")
        w2.delete_object(Bucket=vbucket, Key=k)
        expect("versioned PUT then DELETE", vbucket, k, None)
        w1.put_object(Bucket=vbucket, Key=k, Body=body(f"{k} v3"))
        expect("versioned DELETE then PUT", vbucket, k, body(f"{k} v3"))

    for a in anomalies:
        print("ANOMALY", a)
    print(f"anomalies: {len(anomalies)}")
    sys.exit(1 if anomalies else 0)


if __name__ == "__main__":
    main()
