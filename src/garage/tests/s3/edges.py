"""The edges of the S3 API that issue 32 lists, with boto3 (run by
tests/e2e/s3_features.rs on one node and on three zones): malformed
authentication (empty or unknown `Authorization`, an incomplete SigV4
header, an empty Content-MD5), `x-amz-expected-bucket-owner`, bucket
names S3 refuses, Ceph's `allow-unordered` with a delimiter,
`x-amz-expiration` on GET and HEAD, and CORS
headers on error responses, refused requests and presigned URLs.

Usage: edges.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Prints "all edge checks passed".
"""
import sys
import urllib.request

from s3util import client, expect_error, wait_for

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]
w = client(endpoints[0], key_id, secret)
bucket = "edges"
w.create_bucket(Bucket=bucket)


def with_header(name, value, when="before-send"):
    """A client whose PutObject requests get header `name` set to `value`
    (None: removed), before signing or after it."""
    c = client(endpoints[-1], key_id, secret)

    def hook(request, **_):
        if value is None:
            if name in request.headers:
                del request.headers[name]
        else:
            request.headers[name] = value
    c.meta.events.register(f"{when}.s3.PutObject", hook)
    return c


put = {"Bucket": bucket, "Key": "k", "Body": b"hello"}
expect_error("AccessDenied", 403, with_header("Authorization", "").put_object, **put)
expect_error("InvalidArgument", 400, with_header("Authorization", "Bearer xyz").put_object, **put)
expect_error("AuthorizationHeaderMalformed", 400,
             with_header("Authorization", "AWS4-HMAC-SHA256 garbage").put_object, **put)
expect_error("InvalidDigest", 400,
             with_header("Content-MD5", "", "before-sign").put_object, **put)
expect_error("BadDigest", 400,
             with_header("Content-MD5", "rL0Y20zC+Fzt72VPzMSk2A==", "before-sign").put_object, **put)
print("authentication: ok", flush=True)

w.put_object(**put)
expect_error("AccessDenied", 403, w.get_object, Bucket=bucket, Key="k",
             ExpectedBucketOwner="123456789012")
assert w.get_object(Bucket=bucket, Key="k", ExpectedBucketOwner=key_id)["Body"].read() == b"hello"
print("expected bucket owner: ok", flush=True)

for bad in ["a.-b", "a-.b", "xn--abc", "sthree-abc", "b-s3alias", "b--ol-s3", "192.168.5.4", "a..b"]:
    expect_error("InvalidBucketName", 400, w.create_bucket, Bucket=bad)
print("bucket names: ok", flush=True)

u = client(endpoints[0], key_id, secret)
u.meta.events.register("before-sign.s3.ListObjectsV2",
                       lambda request, **_: setattr(request, "url", request.url + "&allow-unordered=true"))
expect_error("InvalidArgument", 400, u.list_objects_v2, Bucket=bucket, Delimiter="/")
assert [o["Key"] for o in u.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]
print("unordered listing: ok", flush=True)

w.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
    {"ID": "r1", "Status": "Enabled", "Filter": {"Prefix": "exp/"}, "Expiration": {"Days": 2}}]})
w.put_object(Bucket=bucket, Key="exp/a", Body=b"x")
wait_for("x-amz-expiration on HEAD",
         lambda: 'rule-id="r1"' in w.head_object(Bucket=bucket, Key="exp/a").get("Expiration", ""))
g = w.get_object(Bucket=bucket, Key="exp/a")
assert g["Expiration"].startswith('expiry-date="') and 'rule-id="r1"' in g["Expiration"], g
assert "Expiration" not in w.head_object(Bucket=bucket, Key="k")
print("x-amz-expiration: ok", flush=True)

# Checksum algorithm and type in listings and copy results.
w.put_object(Bucket=bucket, Key="sum/a", Body=b"summed", ChecksumAlgorithm="SHA256")
w.put_object(Bucket=bucket, Key="sum/b", Body=b"plain")
listed = {o["Key"]: o for o in w.list_objects_v2(Bucket=bucket, Prefix="sum/")["Contents"]}
assert listed["sum/a"]["ChecksumAlgorithm"] == ["SHA256"], listed
assert listed["sum/a"]["ChecksumType"] == "FULL_OBJECT", listed
assert "ChecksumAlgorithm" not in listed["sum/b"] or listed["sum/b"]["ChecksumAlgorithm"] == ["CRC32"], listed
v = w.list_object_versions(Bucket=bucket, Prefix="sum/a")["Versions"][0]
assert v["ChecksumAlgorithm"] == ["SHA256"] and v["ChecksumType"] == "FULL_OBJECT", v
c = w.copy_object(Bucket=bucket, Key="sum/c", CopySource={"Bucket": bucket, "Key": "sum/a"})
assert c["CopyObjectResult"].get("ChecksumSHA256"), c
assert c["CopyObjectResult"].get("ChecksumType") == "FULL_OBJECT", c
print("checksum types: ok", flush=True)

# Policy conditions on request headers and on the object's tags.
import json
w.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
     "Resource": f"arn:aws:s3:::{bucket}/enc-only/*",
     "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption": "AES256"}}},
    {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
     "Resource": f"arn:aws:s3:::{bucket}/*",
     "Condition": {"StringEquals": {"s3:ExistingObjectTag/keep": "yes"}}},
    {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
     "Resource": f"arn:aws:s3:::{bucket}/*",
     "Condition": {"StringEquals": {"s3:RequestObjectTag/class": "secret"}}}]}))
expect_error("AccessDenied", 403, w.put_object, Bucket=bucket, Key="enc-only/a", Body=b"x")
w.put_object(Bucket=bucket, Key="enc-only/a", Body=b"x", ServerSideEncryption="AES256")
w.put_object(Bucket=bucket, Key="kept", Body=b"x", Tagging="keep=yes")
w.put_object(Bucket=bucket, Key="not-kept", Body=b"x", Tagging="keep=no")
expect_error("AccessDenied", 403, w.delete_object, Bucket=bucket, Key="kept")
w.delete_object(Bucket=bucket, Key="not-kept")
r = w.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "kept"}]})
assert [e["Code"] for e in r.get("Errors", [])] == ["AccessDenied"], r
expect_error("AccessDenied", 403, w.put_object, Bucket=bucket, Key="t", Body=b"x",
             Tagging="class=secret")
w.delete_bucket_policy(Bucket=bucket)
print("policy conditions: ok", flush=True)

w.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [
    {"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET", "PUT"]}]})


def raw(url, method="GET", headers=None):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


origin = {"Origin": "https://app.example"}
missing = w.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "missing"})
present = w.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"})
for url, want in [(present, 200), (missing, 404),
                  (f"{endpoints[0]}/{bucket}/k", 403),
                  (f"{endpoints[0]}/{bucket}/k?AWSAccessKeyId=GK1&Expires=1&Signature=abc", 400)]:
    status, headers = raw(url, headers=origin)
    assert status == want, (url, status)
    allowed = {k.lower(): v for k, v in headers.items()}.get("access-control-allow-origin")
    assert allowed == "https://app.example", (url, status, headers)
    status, headers = raw(url, headers={"Origin": "https://other.example"})
    assert "access-control-allow-origin" not in {k.lower() for k in headers}, (url, headers)
print("CORS on errors and presigned URLs: ok", flush=True)
print("all edge checks passed", flush=True)
