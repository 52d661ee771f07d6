"""SSE-S3, SSE-KMS and default bucket encryption with boto3, run by
tests/e2e/s3_features.rs against nodes with no key configured by hand
(the cluster makes SSE-S3's key and the default aws/s3 KMS key itself):
PutObject, multipart uploads and copies with
`x-amz-server-side-encryption: AES256` or `aws:kms` (a key id, an alias,
an ARN, or none), encryption contexts and bucket keys, copies between
SSE-C, SSE-S3 and SSE-KMS, Put/Get/DeleteBucketEncryption with either
algorithm, the bucket default applied to plain writes, reads (whole,
ranges) through every endpoint, and each error case with AWS's code and
status.

Objects written here carry SSE-S3-PLAINTEXT-MARKER-7d2f (which must not be
found in clear on disk); a plain control object carries
PLAIN-SSE3-CONTROL-MARKER-7d2f (which must).

Environment: KMS_KEY_ID, the id of a key made with `garage kms create
--alias sse-test` (so alias/sse-test names it too).

Usage: sse.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Prints "all SSE checks passed".
"""
import hashlib
import os
import sys

from s3util import client, expect_error, wait_for

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]
w = client(endpoints[0], key_id, secret)
readers = [client(e, key_id, secret) for e in endpoints]
bucket = "sse-s3"
MARKER = b"SSE-S3-PLAINTEXT-MARKER-7d2f"
CONTROL = b"PLAIN-SSE3-CONTROL-MARKER-7d2f"
MIB = 1 << 20


def data(n):
    """n bytes of random data with the marker every 64 KiB."""
    b = bytearray(os.urandom(n))
    for off in range(0, max(n - len(MARKER), 0), 64 * 1024):
        b[off:off + len(MARKER)] = MARKER
    return bytes(b)


def md5(b):
    return hashlib.md5(b).hexdigest()


w.create_bucket(Bucket=bucket)

# PutObject with SSE-S3: small (inline) and several blocks.
for name, size in [("small", 1000), ("big", 3 * MIB + 5)]:
    body = data(size)
    r = w.put_object(Bucket=bucket, Key=name, Body=body, ServerSideEncryption="AES256")
    assert r["ServerSideEncryption"] == "AES256", r
    assert r["ETag"].strip('"') == md5(body), "an SSE-S3 ETag is the MD5, as on S3"
    for rd in readers:
        g = rd.get_object(Bucket=bucket, Key=name)
        assert g["Body"].read() == body and g["ServerSideEncryption"] == "AES256", name
        assert rd.head_object(Bucket=bucket, Key=name)["ServerSideEncryption"] == "AES256"
    if size > 2 * MIB:
        part = readers[-1].get_object(Bucket=bucket, Key=name, Range=f"bytes={MIB - 3}-{2 * MIB + 2}")
        assert part["Body"].read() == body[MIB - 3:2 * MIB + 3]
# Plain control objects, inline and in blocks.
w.put_object(Bucket=bucket, Key="control", Body=CONTROL + os.urandom(2000))
w.put_object(Bucket=bucket, Key="control-big", Body=CONTROL + os.urandom(2 * MIB))
assert "ServerSideEncryption" not in w.head_object(Bucket=bucket, Key="control")
print("put and get: ok", flush=True)

# Errors.
expect_error("NotImplemented", 501, w.put_object, Bucket=bucket, Key="dsse", Body=b"x",
             ServerSideEncryption="aws:kms:dsse")
expect_error("InvalidArgument", 400, w.put_object, Bucket=bucket, Key="bad", Body=b"x",
             ServerSideEncryption="AES128")
ssec = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}
expect_error("InvalidArgument", 400, w.put_object, Bucket=bucket, Key="both", Body=b"x",
             ServerSideEncryption="AES256", **ssec)
expect_error("InvalidRequest", 400, w.get_object, Bucket=bucket, Key="small", **ssec)
print("errors: ok", flush=True)

# Multipart upload with SSE-S3.
parts = [data(5 * MIB), data(MIB + 1)]
up = w.create_multipart_upload(Bucket=bucket, Key="mp", ServerSideEncryption="AES256")
assert up["ServerSideEncryption"] == "AES256", up
etags = []
for n, p in enumerate(parts, 1):
    r = w.upload_part(Bucket=bucket, Key="mp", UploadId=up["UploadId"], PartNumber=n, Body=p)
    assert r["ServerSideEncryption"] == "AES256" and r["ETag"].strip('"') == md5(p), r
    etags.append(r["ETag"])
done = w.complete_multipart_upload(
    Bucket=bucket, Key="mp", UploadId=up["UploadId"],
    MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
assert done["ServerSideEncryption"] == "AES256", done
for rd in readers:
    assert rd.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"".join(parts)
    p2 = rd.get_object(Bucket=bucket, Key="mp", PartNumber=2)
    assert p2["Body"].read() == parts[1] and p2["PartsCount"] == 2
print("multipart: ok", flush=True)

# Copies: SSE-S3 to SSE-S3 (the data key is kept, the blocks shared),
# to plain (a source without the marker), and plain to SSE-S3.
big = w.get_object(Bucket=bucket, Key="big")["Body"].read()
c = w.copy_object(Bucket=bucket, Key="copy-enc", CopySource={"Bucket": bucket, "Key": "big"},
                  ServerSideEncryption="AES256")
assert c["ServerSideEncryption"] == "AES256", c
unmarked = os.urandom(MIB + 7)
w.put_object(Bucket=bucket, Key="unmarked", Body=unmarked, ServerSideEncryption="AES256")
w.copy_object(Bucket=bucket, Key="copy-plain", CopySource={"Bucket": bucket, "Key": "unmarked"})
c = w.copy_object(Bucket=bucket, Key="copy-of-plain", CopySource={"Bucket": bucket, "Key": "control"},
                  ServerSideEncryption="AES256")
assert c["ServerSideEncryption"] == "AES256"
for rd in readers:
    assert rd.get_object(Bucket=bucket, Key="copy-enc")["Body"].read() == big
    plain = rd.get_object(Bucket=bucket, Key="copy-plain")
    assert plain["Body"].read() == unmarked and "ServerSideEncryption" not in plain
    assert rd.get_object(Bucket=bucket, Key="copy-of-plain")["Body"].read().startswith(CONTROL)
print("copies: ok", flush=True)

# Default bucket encryption.
expect_error("ServerSideEncryptionConfigurationNotFoundError", 404, w.get_bucket_encryption,
             Bucket=bucket)
rule = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": False}
expect_error("InvalidArgument", 400, w.put_bucket_encryption, Bucket=bucket,
             ServerSideEncryptionConfiguration={"Rules": [
                 {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256",
                                                         "KMSMasterKeyID": "alias/sse-test"}}]})
w.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [rule]})
got = w.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
assert got == [rule], got
# As on AWS, the setting takes a moment to reach the node a write goes to.
wait_for("the default encryption on the writing node",
         lambda: "ServerSideEncryption" in w.put_object(Bucket=bucket, Key="by-default",
                                                        Body=data(100)))
body = data(2 * MIB)
r = w.put_object(Bucket=bucket, Key="by-default", Body=body)
assert r["ServerSideEncryption"] == "AES256", r
assert readers[-1].get_object(Bucket=bucket, Key="by-default")["Body"].read() == body
w.delete_bucket_encryption(Bucket=bucket)
expect_error("ServerSideEncryptionConfigurationNotFoundError", 404, w.get_bucket_encryption,
             Bucket=bucket)
print("default encryption: ok", flush=True)

# SSE-KMS.
KMS_ID = os.environ["KMS_KEY_ID"]
ARN = f"arn:aws:kms:garage:000000000000:key/{KMS_ID}"
b64 = __import__("base64").b64encode
context = b64(b'{"project":"sse-test","team":"a"}').decode()
for name, key_ref in [("kms-id", KMS_ID), ("kms-alias", "alias/sse-test"), ("kms-arn", ARN)]:
    body = data(MIB + 17)
    r = w.put_object(Bucket=bucket, Key=name, Body=body, ServerSideEncryption="aws:kms",
                     SSEKMSKeyId=key_ref, SSEKMSEncryptionContext=context, BucketKeyEnabled=True)
    assert r["ServerSideEncryption"] == "aws:kms" and r["SSEKMSKeyId"] == ARN, r
    assert r["BucketKeyEnabled"] is True and r["ETag"].strip('"') == md5(body), r
    assert r["SSEKMSEncryptionContext"], r
    for rd in readers:
        g = rd.get_object(Bucket=bucket, Key=name)
        assert g["Body"].read() == body and g["SSEKMSKeyId"] == ARN, name
        h = rd.head_object(Bucket=bucket, Key=name)
        assert h["ServerSideEncryption"] == "aws:kms" and h["BucketKeyEnabled"] is True, h
# No key named: the default aws/s3 key, made by the cluster.
r = w.put_object(Bucket=bucket, Key="kms-default", Body=data(300), ServerSideEncryption="aws:kms")
default_arn = r["SSEKMSKeyId"]
assert default_arn.startswith("arn:aws:kms:garage:") and default_arn != ARN, r
assert "BucketKeyEnabled" not in r, r
expect_error("KMS.NotFoundException", 400, w.put_object, Bucket=bucket, Key="x", Body=b"x",
             ServerSideEncryption="aws:kms", SSEKMSKeyId="alias/no-such-key")
expect_error("InvalidArgument", 400, w.put_object, Bucket=bucket, Key="x", Body=b"x",
             ServerSideEncryption="AES256", SSEKMSKeyId=KMS_ID)
for bad in ["not base64!", b64(b"[1,2]").decode(), b64(b'{"aws:x":"1"}').decode()]:
    expect_error("InvalidArgument", 400, w.put_object, Bucket=bucket, Key="x", Body=b"x",
                 ServerSideEncryption="aws:kms", SSEKMSEncryptionContext=bad)
expect_error("InvalidRequest", 400, w.get_object, Bucket=bucket, Key="kms-id", **ssec)
print("SSE-KMS put and get: ok", flush=True)

up = w.create_multipart_upload(Bucket=bucket, Key="kms-mp", ServerSideEncryption="aws:kms",
                               SSEKMSKeyId="alias/sse-test")
assert up["SSEKMSKeyId"] == ARN, up
etags = [w.upload_part(Bucket=bucket, Key="kms-mp", UploadId=up["UploadId"], PartNumber=n,
                       Body=p)["ETag"] for n, p in enumerate(parts, 1)]
done = w.complete_multipart_upload(
    Bucket=bucket, Key="kms-mp", UploadId=up["UploadId"],
    MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
assert done["ServerSideEncryption"] == "aws:kms" and done["SSEKMSKeyId"] == ARN, done
for rd in readers:
    assert rd.get_object(Bucket=bucket, Key="kms-mp")["Body"].read() == b"".join(parts)
print("SSE-KMS multipart: ok", flush=True)

# Copies between SSE-C, SSE-S3 and SSE-KMS.
ssec_ok = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(16).hex()}
ssec_src = {"CopySource" + k: v for k, v in ssec_ok.items()}
kms_body = w.get_object(Bucket=bucket, Key="kms-id")["Body"].read()
w.put_object(Bucket=bucket, Key="ssec", Body=kms_body, **ssec_ok)
copies = [
    ("kms-to-s3", "kms-id", {"ServerSideEncryption": "AES256"}, "AES256"),
    ("kms-to-kms-default", "kms-id", {"ServerSideEncryption": "aws:kms"}, "aws:kms"),
    ("s3-to-kms", "big", {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KMS_ID}, "aws:kms"),
    ("ssec-to-kms", "ssec", {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KMS_ID, **ssec_src},
     "aws:kms"),
    ("kms-to-ssec", "kms-id", ssec_ok, None),
    ("kms-to-plain", "kms-unmarked", {}, None),
]
w.put_object(Bucket=bucket, Key="kms-unmarked", Body=unmarked, ServerSideEncryption="aws:kms")
for dst, src, extra, algo in copies:
    c = w.copy_object(Bucket=bucket, Key=dst, CopySource={"Bucket": bucket, "Key": src}, **extra)
    assert c.get("ServerSideEncryption") == algo, (dst, c)
    want = {"big": big, "kms-unmarked": unmarked}.get(src, kms_body)
    for rd in readers:
        more = ssec_ok if dst == "kms-to-ssec" else {}
        got = rd.get_object(Bucket=bucket, Key=dst, **more)
        assert got["Body"].read() == want, dst
        assert got.get("ServerSideEncryption") == algo, (dst, got)
assert w.head_object(Bucket=bucket, Key="kms-to-kms-default")["SSEKMSKeyId"] == default_arn
print("SSE-KMS copies: ok", flush=True)

# Bucket default with SSE-KMS.
kbucket = "sse-kms-default"
w.create_bucket(Bucket=kbucket)
expect_error("KMS.NotFoundException", 400, w.put_bucket_encryption, Bucket=kbucket,
             ServerSideEncryptionConfiguration={"Rules": [
                 {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                         "KMSMasterKeyID": "alias/nope"}}]})
krule = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                "KMSMasterKeyID": "alias/sse-test"},
         "BucketKeyEnabled": True}
w.put_bucket_encryption(Bucket=kbucket, ServerSideEncryptionConfiguration={"Rules": [krule]})
got = w.get_bucket_encryption(Bucket=kbucket)["ServerSideEncryptionConfiguration"]["Rules"]
assert got == [krule], got
wait_for("the SSE-KMS default on the writing node",
         lambda: w.put_object(Bucket=kbucket, Key="d", Body=data(10)).get("SSEKMSKeyId") == ARN)
body = data(MIB + 3)
r = w.put_object(Bucket=kbucket, Key="by-default", Body=body)
assert r["ServerSideEncryption"] == "aws:kms" and r["BucketKeyEnabled"] is True, r
for rd in readers:
    assert rd.get_object(Bucket=kbucket, Key="by-default")["Body"].read() == body
print("SSE-KMS bucket default: ok", flush=True)
print("all SSE checks passed", flush=True)
