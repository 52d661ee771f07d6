"""Versioning with boto3, run by tests/e2e/s3_versioning.rs: the bucket switch,
version ids on every write, reads and deletes by version id, delete
markers, null versions (before versioning and while suspended),
ListObjectVersions in AWS's order with paging, versions of a thousand keys
and of one key, DeleteObjects by version id, DeleteBucket refused while
versions remain. Each error case is checked for AWS's code and status.

Usage: versioning.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Writes go through the first endpoint; reads through each endpoint in turn.
With GARAGE_TEST_PAUSE=DIR, the script writes DIR/ready after the first
section's writes and waits for DIR/go (a node is killed meanwhile) before
its reads. Prints one "<section>: ok" line per section, then "all
versioning checks passed".
"""
import os
import sys

from botocore.exceptions import ClientError

from s3util import client, expect_error, pause, wait_for

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]
w = client(endpoints[0], key_id, secret)
readers = [client(e, key_id, secret) for e in endpoints]
bucket = "versions"


def set_versioning(status):
    w.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})
    # As on AWS, the change takes a moment to reach every node: wait
    # until each one answers it.
    for r in readers:
        wait_for(f"{status} on every node",
                 lambda: r.get_bucket_versioning(Bucket=bucket).get("Status") == status)


def body(r, key, **kw):
    return r.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


def versions_of(r, prefix, **kw):
    """[(key, version id, is latest, is marker)]: the versions in the
    order listed, then the delete markers in the order listed (boto3
    returns them in two lists)."""
    res = r.list_object_versions(Bucket=bucket, Prefix=prefix, **kw)
    out = [(v["Key"], v["VersionId"], v["IsLatest"], False) for v in res.get("Versions", [])]
    out += [(m["Key"], m["VersionId"], m["IsLatest"], True) for m in res.get("DeleteMarkers", [])]
    return out


def basics():
    w.create_bucket(Bucket=bucket)
    assert "Status" not in w.get_bucket_versioning(Bucket=bucket)
    expect_error("MalformedXML", 400, w.put_bucket_versioning, Bucket=bucket,
                 VersioningConfiguration={"Status": "Sometimes"})
    # Before versioning: no version id; the object is the null version.
    r0 = w.put_object(Bucket=bucket, Key="a", Body=b"zero")
    assert "VersionId" not in r0, r0
    set_versioning("Enabled")
    v1 = w.put_object(Bucket=bucket, Key="a", Body=b"one")["VersionId"]
    v2 = w.put_object(Bucket=bucket, Key="a", Body=b"two" * 2000)["VersionId"]
    assert v1 not in (None, "null") and v2 not in (None, v1), (v1, v2)
    # A multipart upload gets its id at completion.
    up = w.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
    e = w.upload_part(Bucket=bucket, Key="m", UploadId=up, PartNumber=1, Body=b"part")["ETag"]
    vm = w.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=up,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})["VersionId"]
    assert vm not in (None, "null")
    pause()
    for r in readers:
        got = r.get_object(Bucket=bucket, Key="a")
        assert got["Body"].read() == b"two" * 2000 and got["VersionId"] == v2
        assert body(r, "a", VersionId=v1) == b"one"
        assert body(r, "a", VersionId="null") == b"zero"
        assert r.head_object(Bucket=bucket, Key="a", VersionId=v1)["ContentLength"] == 3
        assert r.head_object(Bucket=bucket, Key="m")["VersionId"] == vm
        assert versions_of(r, "a") == [("a", v2, True, False), ("a", v1, False, False),
                                      ("a", "null", False, False)]
        attrs = r.get_object_attributes(Bucket=bucket, Key="a", VersionId=v1,
                                        ObjectAttributes=["ObjectSize"])
        assert attrs["ObjectSize"] == 3 and attrs["VersionId"] == v1
    # Bad and unknown version ids.
    expect_error("InvalidArgument", 400, w.get_object, Bucket=bucket, Key="a", VersionId="nope")
    expect_error("NoSuchVersion", 404, w.get_object, Bucket=bucket, Key="a",
                 VersionId="0" * 80)
    # A delete without a version id writes a delete marker.
    d = w.delete_object(Bucket=bucket, Key="a")
    assert d["DeleteMarker"] is True and d["VersionId"] not in (None, v2), d
    dm = d["VersionId"]
    for r in readers:
        err = expect_error("NoSuchKey", 404, r.get_object, Bucket=bucket, Key="a")
        h = err.response["ResponseMetadata"]["HTTPHeaders"]
        assert h.get("x-amz-delete-marker") == "true" and h.get("x-amz-version-id") == dm, h
        expect_error("MethodNotAllowed", 405, r.get_object, Bucket=bucket, Key="a", VersionId=dm)
        expect_error("405", 405, r.head_object, Bucket=bucket, Key="a", VersionId=dm)
        assert body(r, "a", VersionId=v1) == b"one"
        assert versions_of(r, "a") == [("a", v2, False, False), ("a", v1, False, False),
                                      ("a", "null", False, False), ("a", dm, True, True)]
        keys = [o["Key"] for o in r.list_objects_v2(Bucket=bucket).get("Contents", [])]
        assert keys == ["m"], keys
    # Copying a delete marker: 404 (current) or 400 (by id).
    expect_error("NoSuchKey", 404, w.copy_object, Bucket=bucket, Key="c",
                 CopySource={"Bucket": bucket, "Key": "a"})
    expect_error("InvalidRequest", 400, w.copy_object, Bucket=bucket, Key="c",
                 CopySource={"Bucket": bucket, "Key": "a", "VersionId": dm})
    # Deleting the marker by its id brings v2 back.
    d = w.delete_object(Bucket=bucket, Key="a", VersionId=dm)
    assert d["DeleteMarker"] is True and d["VersionId"] == dm, d
    for r in readers:
        assert body(r, "a") == b"two" * 2000
    # Deleting the current version by its id: the one before is current.
    w.delete_object(Bucket=bucket, Key="a", VersionId=v2)
    for r in readers:
        got = r.get_object(Bucket=bucket, Key="a")
        assert got["Body"].read() == b"one" and got["VersionId"] == v1
        expect_error("NoSuchVersion", 404, r.get_object, Bucket=bucket, Key="a", VersionId=v2)
        assert versions_of(r, "a") == [("a", v1, True, False), ("a", "null", False, False)]
        listed = [(o["Key"], o["Size"]) for o in r.list_objects_v2(Bucket=bucket)["Contents"]]
        assert listed == [("a", 3), ("m", 4)], listed
    # Copy from a version; tags by version id.
    c = w.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "a",
                                                          "VersionId": "null"})
    assert c["CopySourceVersionId"] == "null" and c["VersionId"] not in (None, "null"), c
    w.put_object_tagging(Bucket=bucket, Key="a", VersionId="null",
                         Tagging={"TagSet": [{"Key": "era", "Value": "before"}]})
    w.put_object_tagging(Bucket=bucket, Key="a", VersionId=v1,
                         Tagging={"TagSet": [{"Key": "era", "Value": "one"}]})
    v3 = w.put_object(Bucket=bucket, Key="a", Body=b"three")["VersionId"]
    for r in readers:
        assert body(r, "c") == b"zero"
        t = r.get_object_tagging(Bucket=bucket, Key="a", VersionId="null")
        assert t["TagSet"] == [{"Key": "era", "Value": "before"}] and t["VersionId"] == "null"
        t = r.get_object_tagging(Bucket=bucket, Key="a", VersionId=v1)
        assert t["TagSet"] == [{"Key": "era", "Value": "one"}], t
        assert r.get_object_tagging(Bucket=bucket, Key="a")["VersionId"] == v3
    # The null version deleted by id.
    w.delete_object(Bucket=bucket, Key="a", VersionId="null")
    for r in readers:
        expect_error("NoSuchVersion", 404, r.get_object, Bucket=bucket, Key="a",
                     VersionId="null")
        assert [v[1] for v in versions_of(r, "a")] == [v3, v1]
    # Deleting a version that does not exist succeeds, as on AWS.
    w.delete_object(Bucket=bucket, Key="a", VersionId="0" * 80)
    expect_error("InvalidArgument", 400, w.list_object_versions, Bucket=bucket,
                 VersionIdMarker=v1)


def suspended():
    set_versioning("Suspended")
    r = w.put_object(Bucket=bucket, Key="s", Body=b"s1")
    assert r["VersionId"] == "null", r
    w.put_object(Bucket=bucket, Key="s", Body=b"s2")
    # Key "a" has versions with ids: a suspended write adds a null
    # version over them, a second one replaces it.
    w.put_object(Bucket=bucket, Key="a", Body=b"n1")
    w.put_object(Bucket=bucket, Key="a", Body=b"n2")
    for rd in readers:
        assert versions_of(rd, "s") == [("s", "null", True, False)]
        vs = versions_of(rd, "a")
        assert [v[1] for v in vs][0] == "null" and len(vs) == 3, vs
        assert body(rd, "a") == b"n2"
        assert rd.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    # A delete while suspended is a null delete marker, replacing the
    # null version.
    d = w.delete_object(Bucket=bucket, Key="s")
    assert d["VersionId"] == "null" and d["DeleteMarker"] is True, d
    for rd in readers:
        assert versions_of(rd, "s") == [("s", "null", True, True)]
        expect_error("NoSuchKey", 404, rd.get_object, Bucket=bucket, Key="s")
    set_versioning("Enabled")


def many_versions():
    n = int(os.environ.get("GARAGE_TEST_VERSIONS", "250"))
    ids = [w.put_object(Bucket=bucket, Key="many", Body=str(i).encode())["VersionId"]
           for i in range(n)]
    for r in readers:
        seen = []
        kw = {}
        for _ in range(n):
            res = r.list_object_versions(Bucket=bucket, Prefix="many", MaxKeys=97, **kw)
            seen += [v["VersionId"] for v in res.get("Versions", [])]
            if not res["IsTruncated"]:
                break
            assert len(res["Versions"]) == 97
            kw = {"KeyMarker": res["NextKeyMarker"],
                  "VersionIdMarker": res["NextVersionIdMarker"]}
        assert seen == ids[::-1], (len(seen), len(ids))
        assert body(r, "many", VersionId=ids[n // 2]) == str(n // 2).encode()
    # Many keys, with prefixes rolled up, paged.
    for i in range(30):
        w.put_object(Bucket=bucket, Key=f"dir/{i:02}/x", Body=b"x")
        w.put_object(Bucket=bucket, Key=f"flat/{i:02}", Body=b"y")
        w.put_object(Bucket=bucket, Key=f"flat/{i:02}", Body=b"z")
    for r in readers:
        pages = r.get_paginator("list_object_versions").paginate(
            Bucket=bucket, Prefix="dir/", Delimiter="/", PaginationConfig={"PageSize": 7})
        prefixes = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
        assert prefixes == [f"dir/{i:02}/" for i in range(30)], prefixes
        pages = r.get_paginator("list_object_versions").paginate(
            Bucket=bucket, Prefix="flat/", PaginationConfig={"PageSize": 7})
        listed = [(v["Key"], v["IsLatest"]) for page in pages for v in page.get("Versions", [])]
        expect = [(f"flat/{i:02}", latest) for i in range(30) for latest in (True, False)]
        assert listed == expect, listed[:6]


def delete_objects_and_bucket():
    vs = versions_of(w, "")
    # DeleteObjects by version id, one unknown id among them.
    objects = [{"Key": k, "VersionId": v} for (k, v, _, _) in vs]
    objects.append({"Key": "a", "VersionId": "1" * 80})
    # The bucket is not empty while versions (or markers) remain.
    expect_error("BucketNotEmpty", 409, w.delete_bucket, Bucket=bucket)
    for i in range(0, len(objects), 1000):
        res = w.delete_objects(Bucket=bucket, Delete={"Objects": objects[i:i + 1000]})
        assert not res.get("Errors"), res["Errors"]
        assert all(d["VersionId"] for d in res["Deleted"])
    for r in readers:
        assert versions_of(r, "") == []
    w.delete_bucket(Bucket=bucket)


for section in [basics, suspended, many_versions, delete_objects_and_bucket]:
    section()
    print(f"{section.__name__}: ok", flush=True)
print("all versioning checks passed")
