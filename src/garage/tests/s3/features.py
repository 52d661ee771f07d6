"""Issue 17's S3 features with boto3, run by tests/e2e/s3_features.rs:
conditional deletes, object and bucket tagging. Each error case is checked
for AWS's code and status.

Usage: features.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Writes go through the first endpoint; reads through each endpoint in turn.
Prints one "<section>: ok" line per section, then "all feature checks
passed".
"""
import datetime
import sys

from botocore.exceptions import ClientError

from s3util import client, expect_error

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]
w = client(endpoints[0], key_id, secret)
readers = [client(e, key_id, secret) for e in endpoints]


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


def tags_of(r, key):
    return sorted((t["Key"], t["Value"]) for t in r.get_object_tagging(Bucket=bucket, Key=key)["TagSet"])


def tagging():
    w.put_object(Bucket=bucket, Key="tg/a", Body=b"tagged", Tagging="project=blue&note=two%20words")
    for r in readers:
        assert tags_of(r, "tg/a") == [("note", "two words"), ("project", "blue")]
        got = r.get_object(Bucket=bucket, Key="tg/a")
        assert got["TagCount"] == 2, got
        head = r.head_object(Bucket=bucket, Key="tg/a")
        assert head["ResponseMetadata"]["HTTPHeaders"].get("x-amz-tagging-count") == "2", head
    # Replaced, then removed, seen through every node.
    w.put_object_tagging(Bucket=bucket, Key="tg/a", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    for r in readers:
        assert tags_of(r, "tg/a") == [("k", "v")]
        assert r.get_object(Bucket=bucket, Key="tg/a")["TagCount"] == 1
    res = w.delete_object_tagging(Bucket=bucket, Key="tg/a")
    assert res["ResponseMetadata"]["HTTPStatusCode"] == 204, res
    for r in readers:
        assert tags_of(r, "tg/a") == []
        assert "TagCount" not in r.get_object(Bucket=bucket, Key="tg/a")
        head = r.head_object(Bucket=bucket, Key="tg/a")
        assert "x-amz-tagging-count" not in head["ResponseMetadata"]["HTTPHeaders"]
    # A new version has its own tags (none here).
    w.put_object_tagging(Bucket=bucket, Key="tg/a", Tagging={"TagSet": [{"Key": "old", "Value": "1"}]})
    w.put_object(Bucket=bucket, Key="tg/a", Body=b"new")
    assert tags_of(w, "tg/a") == []

    # S3's limits and errors.
    eleven = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(11)]}
    expect_error("BadRequest", 400, w.put_object_tagging, Bucket=bucket, Key="tg/a", Tagging=eleven)
    expect_error("BadRequest", 400, w.put_object, Bucket=bucket, Key="tg/b", Body=b"x",
                 Tagging="&".join(f"k{i}=v" for i in range(11)))
    dup = {"TagSet": [{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}]}
    expect_error("InvalidTag", 400, w.put_object_tagging, Bucket=bucket, Key="tg/a", Tagging=dup)
    long_key = {"TagSet": [{"Key": "k" * 129, "Value": "1"}]}
    expect_error("InvalidTag", 400, w.put_object_tagging, Bucket=bucket, Key="tg/a", Tagging=long_key)
    long_value = {"TagSet": [{"Key": "k", "Value": "v" * 257}]}
    expect_error("InvalidTag", 400, w.put_object_tagging, Bucket=bucket, Key="tg/a", Tagging=long_value)
    reserved = {"TagSet": [{"Key": "aws:cloudformation", "Value": "1"}]}
    expect_error("InvalidTag", 400, w.put_object_tagging, Bucket=bucket, Key="tg/a", Tagging=reserved)
    ten = {"TagSet": [{"Key": f"k{i}" + "x" * 120, "Value": "v" * 256} for i in range(10)]}
    w.put_object_tagging(Bucket=bucket, Key="tg/a", Tagging=ten)
    assert len(tags_of(w, "tg/a")) == 10
    expect_error("NoSuchKey", 404, w.get_object_tagging, Bucket=bucket, Key="tg/none")
    expect_error("NoSuchKey", 404, w.put_object_tagging, Bucket=bucket, Key="tg/none",
                 Tagging={"TagSet": []})
    assert not exists("tg/b")

    # CopyObject: the source's current tags by default, or the request's.
    w.put_object(Bucket=bucket, Key="tg/src", Body=b"source", Tagging="a=1")
    w.put_object_tagging(Bucket=bucket, Key="tg/src", Tagging={"TagSet": [{"Key": "b", "Value": "2"}]})
    w.copy_object(Bucket=bucket, Key="tg/copy", CopySource={"Bucket": bucket, "Key": "tg/src"})
    assert tags_of(w, "tg/copy") == [("b", "2")]
    w.copy_object(Bucket=bucket, Key="tg/copy2", CopySource={"Bucket": bucket, "Key": "tg/src"},
                  TaggingDirective="REPLACE", Tagging="c=3")
    assert tags_of(w, "tg/copy2") == [("c", "3")]
    w.copy_object(Bucket=bucket, Key="tg/copy3", CopySource={"Bucket": bucket, "Key": "tg/src"},
                  TaggingDirective="REPLACE")
    assert tags_of(w, "tg/copy3") == []

    # Multipart: the tags given at creation.
    up = w.create_multipart_upload(Bucket=bucket, Key="tg/mp", Tagging="mp=yes")
    part = w.upload_part(Bucket=bucket, Key="tg/mp", UploadId=up["UploadId"], PartNumber=1,
                         Body=b"p" * 1000)
    w.complete_multipart_upload(Bucket=bucket, Key="tg/mp", UploadId=up["UploadId"],
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    for r in readers:
        assert tags_of(r, "tg/mp") == [("mp", "yes")]

    # Bucket tags.
    expect_error("NoSuchTagSet", 404, w.get_bucket_tagging, Bucket=bucket)
    w.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "team", "Value": "storage"}]})
    for r in readers:
        got = r.get_bucket_tagging(Bucket=bucket)["TagSet"]
        assert got == [{"Key": "team", "Value": "storage"}], got
    fifty_one = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(51)]}
    expect_error("BadRequest", 400, w.put_bucket_tagging, Bucket=bucket, Tagging=fifty_one)
    res = w.delete_bucket_tagging(Bucket=bucket)
    assert res["ResponseMetadata"]["HTTPStatusCode"] == 204, res
    for r in readers:
        expect_error("NoSuchTagSet", 404, r.get_bucket_tagging, Bucket=bucket)
    print("tagging: ok", flush=True)


conditional_deletes()
tagging()
print("all feature checks passed", flush=True)
