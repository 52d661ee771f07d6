"""Issue 17's S3 features with boto3, run by tests/s3_features.rs:
conditional deletes, object and bucket tagging. Each error case is checked
for AWS's code and status.

Usage: features.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Writes go through the first endpoint; reads through each endpoint in turn.
Prints one "<section>: ok" line per section, then "all feature checks
passed".
"""
import datetime
import sys

import boto3
from botocore.client import Config
from botocore.exceptions import ClientError

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]


def client(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        region_name="garage",
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
    )


w = client(endpoints[0])
readers = [client(e) for e in endpoints]


def expect_error(code, status, f, *a, **kw):
    try:
        f(*a, **kw)
    except ClientError as e:
        got = (e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
        assert got == (code, status), f"expected {(code, status)}, got {got}: {e}"
        return e
    raise AssertionError(f"expected {code} {status}, the call succeeded")


def exists(key):
    try:
        w.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 404, e
        return False


bucket = "features"
w.create_bucket(Bucket=bucket)


def conditional_deletes():
    etag = w.put_object(Bucket=bucket, Key="cd/a", Body=b"hello")["ETag"]
    head = w.head_object(Bucket=bucket, Key="cd/a")
    # Mismatches: 412, the object stays.
    expect_error("PreconditionFailed", 412, w.delete_object, Bucket=bucket, Key="cd/a",
                 IfMatch='"0123456789abcdef0123456789abcdef"')
    expect_error("PreconditionFailed", 412, w.delete_object, Bucket=bucket, Key="cd/a",
                 IfMatchSize=6)
    later = head["LastModified"] + datetime.timedelta(seconds=5)
    expect_error("PreconditionFailed", 412, w.delete_object, Bucket=bucket, Key="cd/a",
                 IfMatchLastModifiedTime=later)
    # All three given, one wrong: 412.
    expect_error("PreconditionFailed", 412, w.delete_object, Bucket=bucket, Key="cd/a",
                 IfMatch=etag, IfMatchSize=5, IfMatchLastModifiedTime=later)
    assert exists("cd/a")
    for r in readers:
        assert r.get_object(Bucket=bucket, Key="cd/a")["Body"].read() == b"hello"
    # All three right: deleted (204).
    res = w.delete_object(Bucket=bucket, Key="cd/a", IfMatch=etag, IfMatchSize=5,
                          IfMatchLastModifiedTime=head["LastModified"])
    assert res["ResponseMetadata"]["HTTPStatusCode"] == 204, res
    for r in readers:
        expect_error("NoSuchKey", 404, r.get_object, Bucket=bucket, Key="cd/a")
    # If-Match on a key that does not exist (or whose latest is a delete
    # marker): 404 NoSuchKey, `*` included.
    expect_error("NoSuchKey", 404, w.delete_object, Bucket=bucket, Key="cd/a", IfMatch=etag)
    expect_error("NoSuchKey", 404, w.delete_object, Bucket=bucket, Key="cd/a", IfMatch="*")
    expect_error("NoSuchKey", 404, w.delete_object, Bucket=bucket, Key="cd/never", IfMatch="*")
    # Size or time alone on a missing key: 204, as S3 documents.
    w.delete_object(Bucket=bucket, Key="cd/never", IfMatchSize=3)
    # If-Match: * on an existing object deletes it.
    w.put_object(Bucket=bucket, Key="cd/star", Body=b"x")
    w.delete_object(Bucket=bucket, Key="cd/star", IfMatch="*")
    assert not exists("cd/star")
    # A conditional PUT after a conditional delete: the key is free again.
    w.put_object(Bucket=bucket, Key="cd/lock", Body=b"one", IfNoneMatch="*")
    e1 = w.head_object(Bucket=bucket, Key="cd/lock")["ETag"]
    expect_error("PreconditionFailed", 412, w.put_object, Bucket=bucket, Key="cd/lock",
                 Body=b"two", IfNoneMatch="*")
    w.delete_object(Bucket=bucket, Key="cd/lock", IfMatch=e1)
    w.put_object(Bucket=bucket, Key="cd/lock", Body=b"two", IfNoneMatch="*")
    for r in readers:
        assert r.get_object(Bucket=bucket, Key="cd/lock")["Body"].read() == b"two"

    # DeleteObjects with per-key conditions: each key on its own.
    ea = w.put_object(Bucket=bucket, Key="cd/m/a", Body=b"aaa")["ETag"]
    w.put_object(Bucket=bucket, Key="cd/m/b", Body=b"bbb")
    w.put_object(Bucket=bucket, Key="cd/m/c", Body=b"ccc")
    w.put_object(Bucket=bucket, Key="cd/m/d", Body=b"ddd")
    res = w.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "cd/m/a", "ETag": ea},
        {"Key": "cd/m/b", "ETag": '"ffffffffffffffffffffffffffffffff"'},
        {"Key": "cd/m/c", "Size": 4},
        {"Key": "cd/m/d"},
        {"Key": "cd/m/none", "ETag": ea},
    ]})
    deleted = sorted(d["Key"] for d in res.get("Deleted", []))
    errors = sorted((e["Key"], e["Code"]) for e in res.get("Errors", []))
    assert deleted == ["cd/m/a", "cd/m/d"], res
    assert errors == [("cd/m/b", "PreconditionFailed"), ("cd/m/c", "PreconditionFailed"),
                      ("cd/m/none", "NoSuchKey")], res
    assert [exists(k) for k in ["cd/m/a", "cd/m/b", "cd/m/c", "cd/m/d"]] == \
        [False, True, True, False]
    print("conditional deletes: ok", flush=True)


conditional_deletes()
print("all feature checks passed", flush=True)
