"""S3 round trips and error cases with boto3, run by tests/e2e/s3.rs.

Usage: boto3_suite.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Writes go through the first endpoint; every read is done through each
endpoint in turn. Exits non-zero (with the failed assertion) on error.
"""
import datetime
import hashlib
import os
import sys

import boto3
from botocore.client import Config

import s3util
from s3util import expect_error

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]


def client(endpoint, key=key_id, sec=secret):
    return s3util.client(endpoint, key, sec)


w = client(endpoints[0])
readers = [client(e) for e in endpoints]


bucket = "suite"
w.create_bucket(Bucket=bucket)
expect_error("BucketAlreadyOwnedByYou", 409, w.create_bucket, Bucket=bucket)
names = [b["Name"] for b in w.list_buckets()["Buckets"]]
assert bucket in names, names
for r in readers:
    r.head_bucket(Bucket=bucket)
expect_error("NoSuchBucket", 404, w.list_objects_v2, Bucket="no-such-bucket")
expect_error(
    "InvalidLocationConstraint", 400, w.create_bucket, Bucket="elsewhere",
    CreateBucketConfiguration={"LocationConstraint": "mars-1"},
)

# Bucket CORS and website configuration documents.
expect_error("NoSuchCORSConfiguration", 404, w.get_bucket_cors, Bucket=bucket)
rules = [{"AllowedMethods": ["GET", "PUT"], "AllowedOrigins": ["https://example.com"],
          "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600}]
w.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})
got = readers[-1].get_bucket_cors(Bucket=bucket)["CORSRules"]
assert got == rules, got
expect_error("InvalidRequest", 400, w.put_bucket_cors, Bucket=bucket, CORSConfiguration={
    "CORSRules": [{"AllowedMethods": ["PATCH"], "AllowedOrigins": ["*"]}]})
w.delete_bucket_cors(Bucket=bucket)
expect_error("NoSuchCORSConfiguration", 404, readers[-1].get_bucket_cors, Bucket=bucket)
expect_error("NoSuchWebsiteConfiguration", 404, w.get_bucket_website, Bucket=bucket)
w.put_bucket_website(Bucket=bucket, WebsiteConfiguration={
    "IndexDocument": {"Suffix": "index.html"}, "ErrorDocument": {"Key": "404.html"}})
site = readers[-1].get_bucket_website(Bucket=bucket)
assert site["IndexDocument"] == {"Suffix": "index.html"} and site["ErrorDocument"] == {"Key": "404.html"}, site
routing = [
    {"Condition": {"KeyPrefixEquals": "docs/"},
     "Redirect": {"ReplaceKeyPrefixWith": "documents/", "HttpRedirectCode": "301"}},
    {"Condition": {"HttpErrorCodeReturnedEquals": "404"},
     "Redirect": {"HostName": "example.com", "Protocol": "https", "ReplaceKeyWith": "missing.html"}},
]
w.put_bucket_website(Bucket=bucket, WebsiteConfiguration={
    "IndexDocument": {"Suffix": "index.html"}, "RoutingRules": routing})
site = readers[-1].get_bucket_website(Bucket=bucket)
assert site["RoutingRules"] == routing and "ErrorDocument" not in site, site
w.put_bucket_website(Bucket=bucket, WebsiteConfiguration={
    "RedirectAllRequestsTo": {"HostName": "www.example.com", "Protocol": "https"}})
site = readers[-1].get_bucket_website(Bucket=bucket)
assert site["RedirectAllRequestsTo"] == {"HostName": "www.example.com", "Protocol": "https"}, site
assert "IndexDocument" not in site and "RoutingRules" not in site, site
for bad in [
    {"RedirectAllRequestsTo": {"HostName": "x.example.com"}, "IndexDocument": {"Suffix": "i.html"}},
    {"IndexDocument": {"Suffix": "i.html"},
     "RoutingRules": [{"Redirect": {"ReplaceKeyWith": "a", "ReplaceKeyPrefixWith": "b"}}]},
    {"IndexDocument": {"Suffix": "i.html"},
     "RoutingRules": [{"Redirect": {"HostName": "h", "HttpRedirectCode": "200"}}]},
    {"ErrorDocument": {"Key": "e.html"}},
]:
    expect_error("InvalidArgument", 400, w.put_bucket_website, Bucket=bucket, WebsiteConfiguration=bad)
# A refused document leaves the previous one in place.
site = readers[-1].get_bucket_website(Bucket=bucket)
assert site["RedirectAllRequestsTo"]["HostName"] == "www.example.com", site
w.delete_bucket_website(Bucket=bucket)
expect_error("NoSuchWebsiteConfiguration", 404, w.get_bucket_website, Bucket=bucket)

# Lifecycle configuration.
expect_error("NoSuchLifecycleConfiguration", 404, w.get_bucket_lifecycle_configuration, Bucket=bucket)
utc = datetime.timezone.utc
lifecycle = [
    {"ID": "logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Expiration": {"Days": 30}},
    {"ID": "big", "Status": "Disabled",
     "Filter": {"And": {"Prefix": "big/", "ObjectSizeGreaterThan": 1000, "ObjectSizeLessThan": 10000}},
     "Expiration": {"Date": datetime.datetime(2030, 1, 1, tzinfo=utc)}},
    {"ID": "uploads", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}},
    {"ID": "tagged", "Status": "Enabled", "Filter": {"Tag": {"Key": "class", "Value": "tmp"}},
     "Expiration": {"Days": 1}},
    {"ID": "tagged-and", "Status": "Enabled",
     "Filter": {"And": {"Prefix": "t/", "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}},
     "Expiration": {"Days": 2}},
]
w.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": lifecycle})
got = readers[-1].get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
assert got == lifecycle, got


def bad_lifecycle(code, status, **rule):
    r = {"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""}}
    r.update(rule)
    expect_error(code, status, w.put_bucket_lifecycle_configuration, Bucket=bucket,
                 LifecycleConfiguration={"Rules": [r]})


bad_lifecycle("InvalidArgument", 400, Expiration={"Days": 0})
bad_lifecycle("InvalidArgument", 400, Expiration={"Date": datetime.datetime(2030, 1, 1, 12, tzinfo=utc)})
bad_lifecycle("MalformedXML", 400, Expiration={})
bad_lifecycle("MalformedXML", 400, Status="Sometimes", Expiration={"Days": 1})
bad_lifecycle("InvalidArgument", 400, AbortIncompleteMultipartUpload={"DaysAfterInitiation": 0})
bad_lifecycle("InvalidArgument", 400)  # no action
bad_lifecycle("InvalidStorageClass", 400, Transitions=[{"Days": 30, "StorageClass": "GLACIER"}])
bad_lifecycle("InvalidStorageClass", 400,
              NoncurrentVersionTransitions=[{"NoncurrentDays": 30, "StorageClass": "GLACIER"}])
bad_lifecycle("InvalidArgument", 400, NoncurrentVersionExpiration={"NoncurrentDays": 0})
bad_lifecycle("InvalidArgument", 400, Expiration={"ExpiredObjectDeleteMarker": True, "Days": 3})
tag_filter = {"Tag": {"Key": "class", "Value": "tmp"}}
bad_lifecycle("InvalidArgument", 400, Filter=tag_filter,
              AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1})
bad_lifecycle("InvalidArgument", 400, Filter=tag_filter, Expiration={"ExpiredObjectDeleteMarker": True})
bad_lifecycle("InvalidTag", 400, Filter={"Tag": {"Key": "k" * 129, "Value": "v"}}, Expiration={"Days": 1})
bad_lifecycle("MalformedXML", 400, Filter={"Prefix": "a/", "Tag": {"Key": "k", "Value": "v"}},
              Expiration={"Days": 1})
expect_error("InvalidArgument", 400, w.put_bucket_lifecycle_configuration, Bucket=bucket,
             LifecycleConfiguration={"Rules": [lifecycle[0], lifecycle[0]]})
# A refused configuration leaves the previous one in place.
assert readers[-1].get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"] == lifecycle
w.delete_bucket_lifecycle(Bucket=bucket)
expect_error("NoSuchLifecycleConfiguration", 404, readers[-1].get_bucket_lifecycle_configuration,
             Bucket=bucket)

# Sizes around the inline limit and the block size, and a 17 MiB object.
MIB = 1 << 20
sizes = [0, 1, 3071, 3072, 3073, MIB - 1, MIB, MIB + 1, 17 * MIB]
for size in sizes:
    data = os.urandom(size)
    key = f"sizes/{size}"
    put = w.put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/x-test",
                       Metadata={"origin": "suite"})
    assert put["ETag"].strip('"') == hashlib.md5(data).hexdigest(), put
    for r in readers:
        got = r.get_object(Bucket=bucket, Key=key)
        body = got["Body"].read()
        assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest(), (size, len(body))
        assert got["ContentLength"] == size
        assert got["ContentType"] == "application/x-test"
        assert got["Metadata"] == {"origin": "suite"}, got["Metadata"]
    if size > 10:
        part = readers[-1].get_object(Bucket=bucket, Key=key, Range="bytes=3-9")
        assert part["Body"].read() == data[3:10]
        assert part["ContentRange"] == f"bytes 3-9/{size}", part["ContentRange"]
        tail = readers[0].get_object(Bucket=bucket, Key=key, Range=f"bytes={size - 5}-")
        assert tail["Body"].read() == data[-5:]
    print(f"size {size}: ok", flush=True)

# Additional checksums: verified, stored, returned with ChecksumMode.
import base64
import io
data = os.urandom(2 * MIB + 7)
for algo in ["SHA256", "CRC32", "SHA1"]:  # CRC32C and CRC64NVME need awscrt in boto3
    w.put_object(Bucket=bucket, Key=f"sum/{algo}", Body=data, ChecksumAlgorithm=algo)
    got = readers[-1].get_object(Bucket=bucket, Key=f"sum/{algo}", ChecksumMode="ENABLED")
    assert got["Body"].read() == data
    assert got.get("Checksum" + algo), (algo, got)
want = base64.b64encode(hashlib.sha256(data).digest()).decode()
assert readers[0].head_object(Bucket=bucket, Key="sum/SHA256", ChecksumMode="ENABLED")["ChecksumSHA256"] == want
expect_error("BadDigest", 400, w.put_object, Bucket=bucket, Key="sum/bad", Body=b"hello",
             ChecksumSHA256=base64.b64encode(hashlib.sha256(b"other").digest()).decode())
expect_error("404", 404, w.head_object, Bucket=bucket, Key="sum/bad")  # HEAD: no body, no code
# A streamed upload (aws-chunked, checksum in the trailer).
w.upload_fileobj(io.BufferedReader(io.BytesIO(data)), bucket, "sum/streamed")
assert readers[-1].get_object(Bucket=bucket, Key="sum/streamed")["Body"].read() == data

expect_error("InvalidRange", 416, w.get_object, Bucket=bucket, Key="sizes/1", Range="bytes=5-9")
expect_error("NoSuchKey", 404, w.get_object, Bucket=bucket, Key="nope")
etag = w.head_object(Bucket=bucket, Key="sizes/3073")["ETag"]
expect_error("304", 304, w.get_object, Bucket=bucket, Key="sizes/3073", IfNoneMatch=etag)
expect_error("304", 304, w.get_object, Bucket=bucket, Key="sizes/3073", IfNoneMatch=f'"abc", {etag}')
assert w.get_object(Bucket=bucket, Key="sizes/3073", IfNoneMatch='"abc", "def"')["ContentLength"] == 3073
one = w.get_object(Bucket=bucket, Key="sizes/3073", PartNumber=1)
assert one["ContentLength"] == 3073 and "PartsCount" not in one, one
expect_error("InvalidPartNumber", 416, w.get_object, Bucket=bucket, Key="sizes/3073", PartNumber=2)
expect_error("PreconditionFailed", 412, w.get_object, Bucket=bucket, Key="sizes/3073", IfMatch='"abc"')
expect_error("BadDigest", 400, w.put_object, Bucket=bucket, Key="bad", Body=b"hello",
             ContentMD5="1B2M2Y8AsgTpgAmY7PhCfg==")

# Listing: prefixes, delimiter, pagination.
for k in ["l/a", "l/b/1", "l/b/2", "l/c", "l/d/x", "l/e"]:
    w.put_object(Bucket=bucket, Key=k, Body=b"x")
for r in readers:
    res = r.list_objects_v2(Bucket=bucket, Prefix="l/", Delimiter="/")
    assert [o["Key"] for o in res["Contents"]] == ["l/a", "l/c", "l/e"], res
    assert [p["Prefix"] for p in res["CommonPrefixes"]] == ["l/b/", "l/d/"], res
    assert res["KeyCount"] == 5
seen, token = [], None
for _ in range(10):
    kw = {"ContinuationToken": token} if token else {}
    res = w.list_objects_v2(Bucket=bucket, Prefix="l/", Delimiter="/", MaxKeys=2, **kw)
    seen += [o["Key"] for o in res.get("Contents", [])] + [p["Prefix"] for p in res.get("CommonPrefixes", [])]
    if not res["IsTruncated"]:
        break
    token = res["NextContinuationToken"]
assert sorted(seen) == ["l/a", "l/b/", "l/c", "l/d/", "l/e"], seen
v1 = w.list_objects(Bucket=bucket, Prefix="l/", MaxKeys=3)
assert [o["Key"] for o in v1["Contents"]] == ["l/a", "l/b/1", "l/b/2"] and v1["IsTruncated"]
v1 = w.list_objects(Bucket=bucket, Prefix="l/", Marker="l/b/2")
assert [o["Key"] for o in v1["Contents"]] == ["l/c", "l/d/x", "l/e"], v1
after = w.list_objects_v2(Bucket=bucket, Prefix="l/", StartAfter="l/c")
assert [o["Key"] for o in after["Contents"]] == ["l/d/x", "l/e"]

# Multipart: 5 MiB + 5 MiB + 1 byte.
parts_data = [os.urandom(5 * MIB), os.urandom(5 * MIB), b"z"]
up = w.create_multipart_upload(Bucket=bucket, Key="mp", ContentType="video/x-test")
uid = up["UploadId"]
assert any(u["UploadId"] == uid for u in w.list_multipart_uploads(Bucket=bucket)["Uploads"])
etags = []
for i, d in enumerate(parts_data):
    etags.append(w.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=i + 1, Body=d)["ETag"])
listed = w.list_parts(Bucket=bucket, Key="mp", UploadId=uid)["Parts"]
assert [p["PartNumber"] for p in listed] == [1, 2, 3]
parts = [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]
expect_error("InvalidPartOrder", 400, w.complete_multipart_upload, Bucket=bucket, Key="mp",
             UploadId=uid, MultipartUpload={"Parts": [parts[1], parts[0]]})
expect_error("InvalidPart", 400, w.complete_multipart_upload, Bucket=bucket, Key="mp",
             UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"00"'}]})
done = w.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={"Parts": parts})
md5s = b"".join(hashlib.md5(d).digest() for d in parts_data)
assert done["ETag"].strip('"') == hashlib.md5(md5s).hexdigest() + "-3", done["ETag"]
whole = b"".join(parts_data)
for r in readers:
    got = r.get_object(Bucket=bucket, Key="mp")
    assert got["Body"].read() == whole
    assert got["ContentType"] == "video/x-test"
    mid = r.get_object(Bucket=bucket, Key="mp", Range=f"bytes={5 * MIB - 2}-{5 * MIB + 1}")
    assert mid["Body"].read() == whole[5 * MIB - 2:5 * MIB + 2]
    # partNumber: one part of the object as uploaded, with the part count.
    p2 = r.get_object(Bucket=bucket, Key="mp", PartNumber=2)
    assert p2["Body"].read() == parts_data[1] and p2["PartsCount"] == 3, p2
    assert p2["ContentRange"] == f"bytes {5 * MIB}-{10 * MIB - 1}/{10 * MIB + 1}", p2
    assert p2["ResponseMetadata"]["HTTPStatusCode"] == 206
    h3 = r.head_object(Bucket=bucket, Key="mp", PartNumber=3)
    assert h3["ContentLength"] == 1 and h3["PartsCount"] == 3, h3
    expect_error("InvalidPartNumber", 416, r.get_object, Bucket=bucket, Key="mp", PartNumber=4)

# GetObjectAttributes: a multipart object (parts paged), a checksummed one,
# a missing one.
ALL_ATTRS = ["ETag", "ObjectSize", "StorageClass", "ObjectParts", "Checksum"]
for r in readers:
    a = r.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ALL_ATTRS)
    assert a["ETag"].strip('"') == done["ETag"].strip('"'), a
    assert a["ObjectSize"] == len(whole) and a["StorageClass"] == "STANDARD", a
    op = a["ObjectParts"]
    assert op["TotalPartsCount"] == 3, op
    assert [(p["PartNumber"], p["Size"]) for p in op["Parts"]] == [(1, 5 * MIB), (2, 5 * MIB), (3, 1)], op
    assert "Checksum" not in a, a
page = w.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"], MaxParts=2)
assert "ETag" not in page and "ObjectSize" not in page, page
op = page["ObjectParts"]
assert op["IsTruncated"] and op["NextPartNumberMarker"] == 2 and len(op["Parts"]) == 2, op
rest = w.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"],
                               MaxParts=2, PartNumberMarker=2)["ObjectParts"]
assert not rest["IsTruncated"] and [p["PartNumber"] for p in rest["Parts"]] == [3], rest
a = w.get_object_attributes(Bucket=bucket, Key="sum/SHA256", ObjectAttributes=ALL_ATTRS)
assert a["Checksum"]["ChecksumSHA256"] == want and "ObjectParts" not in a, a
assert a["ObjectSize"] == len(data), a
expect_error("NoSuchKey", 404, w.get_object_attributes, Bucket=bucket, Key="nope", ObjectAttributes=["ETag"])

# Multipart checksums (CRC64NVME and CRC32C need awscrt in boto3: the
# Rust unit tests cover them). boto3 computes each part's CRC32 itself.
import struct
import zlib


def b64crc32(b):
    return base64.b64encode(struct.pack(">I", zlib.crc32(b))).decode()


ck_data = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(1024)]
ck_whole = b"".join(ck_data)
part_crcs = [b64crc32(d) for d in ck_data]
composite = base64.b64encode(struct.pack(
    ">I", zlib.crc32(b"".join(struct.pack(">I", zlib.crc32(d)) for d in ck_data)))).decode() + "-3"
for ctype, want_sum in [("COMPOSITE", composite), ("FULL_OBJECT", b64crc32(ck_whole))]:
    k = f"mpsum/{ctype}"
    kw = {} if ctype == "COMPOSITE" else {"ChecksumType": ctype}
    up = w.create_multipart_upload(Bucket=bucket, Key=k, ChecksumAlgorithm="CRC32", **kw)
    assert up["ChecksumAlgorithm"] == "CRC32" and up["ChecksumType"] == ctype, up
    u = up["UploadId"]
    for n, d in enumerate(ck_data):
        r = w.upload_part(Bucket=bucket, Key=k, UploadId=u, PartNumber=n + 1, Body=d,
                          ChecksumAlgorithm="CRC32")
        assert r["ChecksumCRC32"] == part_crcs[n], r
    lp = w.list_parts(Bucket=bucket, Key=k, UploadId=u)
    assert [p["ChecksumCRC32"] for p in lp["Parts"]] == part_crcs, lp
    assert lp["ChecksumAlgorithm"] == "CRC32" and lp["ChecksumType"] == ctype, lp
    mu = [x for x in w.list_multipart_uploads(Bucket=bucket, Prefix=k)["Uploads"]
          if x["UploadId"] == u]
    assert mu and mu[0]["ChecksumAlgorithm"] == "CRC32" and mu[0]["ChecksumType"] == ctype, mu
    cparts = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"], "ChecksumCRC32": p["ChecksumCRC32"]}
              for p in lp["Parts"]]
    bad = [dict(p) for p in cparts]
    bad[1]["ChecksumCRC32"] = part_crcs[0]
    expect_error("InvalidPart", 400, w.complete_multipart_upload, Bucket=bucket, Key=k, UploadId=u,
                 MultipartUpload={"Parts": bad})
    expect_error("BadDigest", 400, w.complete_multipart_upload, Bucket=bucket, Key=k, UploadId=u,
                 MultipartUpload={"Parts": cparts}, ChecksumCRC32=b64crc32(b"other"),
                 **({"ChecksumType": ctype} if ctype == "FULL_OBJECT" else {}))
    if ctype == "COMPOSITE":
        no_sums = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in cparts]
        expect_error("InvalidRequest", 400, w.complete_multipart_upload, Bucket=bucket, Key=k,
                     UploadId=u, MultipartUpload={"Parts": no_sums})
        done = w.complete_multipart_upload(Bucket=bucket, Key=k, UploadId=u,
                                           MultipartUpload={"Parts": cparts})
    else:
        done = w.complete_multipart_upload(Bucket=bucket, Key=k, UploadId=u, ChecksumType=ctype,
                                           ChecksumCRC32=want_sum, MultipartUpload={"Parts": cparts})
    assert done["ChecksumCRC32"] == want_sum and done["ChecksumType"] == ctype, done
    for r in readers:
        got = r.get_object(Bucket=bucket, Key=k, ChecksumMode="ENABLED")
        assert got["Body"].read() == ck_whole
        assert got["ChecksumCRC32"] == want_sum and got["ChecksumType"] == ctype, got
        h = r.head_object(Bucket=bucket, Key=k, ChecksumMode="ENABLED")
        assert h["ChecksumCRC32"] == want_sum and h["ChecksumType"] == ctype, h
        a = r.get_object_attributes(Bucket=bucket, Key=k, ObjectAttributes=["Checksum", "ObjectParts"])
        assert a["Checksum"]["ChecksumCRC32"] == want_sum, a
        assert a["Checksum"]["ChecksumType"] == ctype, a
        assert [p["ChecksumCRC32"] for p in a["ObjectParts"]["Parts"]] == part_crcs, a
# A part without the upload's checksum is refused.
bare = boto3.client("s3", endpoint_url=endpoints[0], aws_access_key_id=key_id,
                    aws_secret_access_key=secret, region_name="garage",
                    config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"},
                                  request_checksum_calculation="when_required"))
u = w.create_multipart_upload(Bucket=bucket, Key="mpsum/missing", ChecksumAlgorithm="SHA256")["UploadId"]
expect_error("InvalidRequest", 400, bare.upload_part, Bucket=bucket, Key="mpsum/missing", UploadId=u,
             PartNumber=1, Body=b"x")
expect_error("InvalidRequest", 400, w.upload_part, Bucket=bucket, Key="mpsum/missing", UploadId=u,
             PartNumber=1, Body=b"x", ChecksumAlgorithm="CRC32")
r = w.upload_part(Bucket=bucket, Key="mpsum/missing", UploadId=u, PartNumber=1, Body=b"x",
                  ChecksumAlgorithm="SHA256")
assert r["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(b"x").digest()).decode(), r
w.abort_multipart_upload(Bucket=bucket, Key="mpsum/missing", UploadId=u)
expect_error("InvalidRequest", 400, w.create_multipart_upload, Bucket=bucket, Key="mpsum/x",
             ChecksumAlgorithm="SHA256", ChecksumType="FULL_OBJECT")
# s3transfer (boto3's upload_fileobj, aws-cli's cp) creates its multipart
# uploads with CRC32 by default and gives the parts' checksums back at
# completion: 8 MiB parts here.
big = os.urandom(9 * MIB)
w.upload_fileobj(io.BytesIO(big), bucket, "mpsum/s3transfer")
pc = [struct.pack(">I", zlib.crc32(big[o:o + 8 * MIB])) for o in (0, 8 * MIB)]
h = readers[-1].head_object(Bucket=bucket, Key="mpsum/s3transfer", ChecksumMode="ENABLED")
assert h["ChecksumCRC32"] == base64.b64encode(struct.pack(">I", zlib.crc32(b"".join(pc)))).decode() + "-2", h
assert readers[0].get_object(Bucket=bucket, Key="mpsum/s3transfer")["Body"].read() == big
print("multipart checksums: ok", flush=True)

# UploadPartCopy: a range of "mp" and the whole of a small object.
up = w.create_multipart_upload(Bucket=bucket, Key="pc")
uid3 = up["UploadId"]
r1 = w.upload_part_copy(Bucket=bucket, Key="pc", UploadId=uid3, PartNumber=1,
                        CopySource={"Bucket": bucket, "Key": "mp"},
                        CopySourceRange=f"bytes=1-{5 * MIB + 10}")
r2 = w.upload_part_copy(Bucket=bucket, Key="pc", UploadId=uid3, PartNumber=2,
                        CopySource={"Bucket": bucket, "Key": "sizes/3071"})
expect_error("InvalidArgument", 400, w.upload_part_copy, Bucket=bucket, Key="pc", UploadId=uid3,
             PartNumber=3, CopySource={"Bucket": bucket, "Key": "sizes/1"}, CopySourceRange="bytes=0-5")
w.complete_multipart_upload(Bucket=bucket, Key="pc", UploadId=uid3, MultipartUpload={"Parts": [
    {"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]},
    {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]}]})
small = w.get_object(Bucket=bucket, Key="sizes/3071")["Body"].read()
for r in readers:
    assert r.get_object(Bucket=bucket, Key="pc")["Body"].read() == whole[1:5 * MIB + 11] + small

# A part under 5 MiB that is not the last is refused.
up = w.create_multipart_upload(Bucket=bucket, Key="small-parts")
uid2 = up["UploadId"]
e1 = w.upload_part(Bucket=bucket, Key="small-parts", UploadId=uid2, PartNumber=1, Body=b"a" * 100)["ETag"]
e2 = w.upload_part(Bucket=bucket, Key="small-parts", UploadId=uid2, PartNumber=2, Body=b"b")["ETag"]
expect_error("EntityTooSmall", 400, w.complete_multipart_upload, Bucket=bucket, Key="small-parts",
             UploadId=uid2, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
w.abort_multipart_upload(Bucket=bucket, Key="small-parts", UploadId=uid2)
expect_error("NoSuchUpload", 404, w.list_parts, Bucket=bucket, Key="small-parts", UploadId=uid2)

# Copies share the source's data; metadata is copied or replaced.
for size in [3071, MIB + 1]:
    src = f"sizes/{size}"
    data = readers[0].get_object(Bucket=bucket, Key=src)["Body"].read()
    res = w.copy_object(Bucket=bucket, Key=f"copy/{size}", CopySource={"Bucket": bucket, "Key": src})
    assert res["CopyObjectResult"]["ETag"].strip('"') == hashlib.md5(data).hexdigest()
    for r in readers:
        got = r.get_object(Bucket=bucket, Key=f"copy/{size}")
        assert got["Body"].read() == data and got["Metadata"] == {"origin": "suite"}
    w.copy_object(Bucket=bucket, Key=f"copy/{size}", CopySource={"Bucket": bucket, "Key": src},
                  MetadataDirective="REPLACE", ContentType="text/plain", Metadata={"k": "v"})
    got = readers[-1].head_object(Bucket=bucket, Key=f"copy/{size}")
    assert got["ContentType"] == "text/plain" and got["Metadata"] == {"k": "v"}, got
w.delete_object(Bucket=bucket, Key=f"sizes/{MIB + 1}")
assert readers[-1].get_object(Bucket=bucket, Key=f"copy/{MIB + 1}")["ContentLength"] == MIB + 1
expect_error("InvalidRequest", 400, w.copy_object, Bucket=bucket, Key="mp",
             CopySource={"Bucket": bucket, "Key": "mp"})
expect_error("NoSuchKey", 404, w.copy_object, Bucket=bucket, Key="x",
             CopySource={"Bucket": bucket, "Key": "no-such-key"})
expect_error("PreconditionFailed", 412, w.copy_object, Bucket=bucket, Key="x",
             CopySource={"Bucket": bucket, "Key": "mp"}, CopySourceIfMatch='"nope"')

# Keys of up to 1024 bytes of UTF-8, in exact order even when they share
# a long prefix; 1025 bytes is KeyTooLongError.
stem = "long/" + "é" * 508  # 5 + 1016 bytes
long_keys = [stem + s for s in ("b", "a", "ab")]
for k in long_keys:
    w.put_object(Bucket=bucket, Key=k, Body=k.encode())
for r in readers:
    got = [o["Key"] for o in r.list_objects_v2(Bucket=bucket, Prefix="long/")["Contents"]]
    assert got == sorted(long_keys, key=lambda k: k.encode()), got
    page = r.list_objects_v2(Bucket=bucket, Prefix="long/", StartAfter=stem + "a")
    assert [o["Key"] for o in page["Contents"]] == [stem + "ab", stem + "b"], page
    assert r.get_object(Bucket=bucket, Key=stem + "ab")["Body"].read() == (stem + "ab").encode()
expect_error("KeyTooLongError", 400, w.put_object, Bucket=bucket, Key=stem + "xyzw", Body=b"")
for k in long_keys:
    w.delete_object(Bucket=bucket, Key=k)

# SSE-C: objects sealed with the client's key (doc/s3.md, "SSE-C").
# SSEC_MARKER is only ever uploaded encrypted: tests/e2e/s3.rs (one node) greps
# the node's data and metadata dirs for it, and for PLAIN_MARKER (uploaded
# in clear, the grep's control).
SSEC_MARKER = b"SSE-C-PLAINTEXT-MARKER-5b1e0c"
PLAIN_MARKER = b"PLAIN-CONTROL-MARKER-5b1e0c"


def marked(n, m):
    b = bytearray(os.urandom(n))
    if n >= len(m):
        for at in {0, max(0, min(MIB - 5, n - len(m))), n - len(m)}:
            b[at:at + len(m)] = m
    return bytes(b)


def sha(b):
    return hashlib.sha256(b).hexdigest()


k1, k2 = os.urandom(32), os.urandom(32)
sse1 = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": k1}
sse2 = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": k2}
k1_md5 = base64.b64encode(hashlib.md5(k1).digest()).decode()
sealed = {}
for size in [0, 1, 3071, 3072, 3073, MIB - 1, MIB, MIB + 1, 3 * MIB]:
    data = marked(size, SSEC_MARKER)
    key = f"ssec/{size}"
    put = w.put_object(Bucket=bucket, Key=key, Body=data, **sse1)
    assert put["SSECustomerAlgorithm"] == "AES256" and put["SSECustomerKeyMD5"] == k1_md5, put
    sealed[key] = data
    for r in readers:
        got = r.get_object(Bucket=bucket, Key=key, **sse1)
        assert got["ContentLength"] == size and got["SSECustomerKeyMD5"] == k1_md5, got
        assert got["SSECustomerAlgorithm"] == "AES256", got
        assert sha(got["Body"].read()) == sha(data), f"SSE-C size {size} differs"
        head = r.head_object(Bucket=bucket, Key=key, **sse1)
        assert head["ContentLength"] == size and head["SSECustomerKeyMD5"] == k1_md5, head
# Range GETs: across the first block boundary, inside the last block, in
# an inline object.
big = sealed[f"ssec/{3 * MIB}"]
for lo, hi in [(MIB - 10, MIB + 9), (3 * MIB - 7, 3 * MIB - 1), (2 * MIB - 1, 2 * MIB)]:
    got = readers[-1].get_object(Bucket=bucket, Key=f"ssec/{3 * MIB}", Range=f"bytes={lo}-{hi}", **sse1)
    assert got["ContentRange"] == f"bytes {lo}-{hi}/{3 * MIB}", got["ContentRange"]
    assert got["Body"].read() == big[lo:hi + 1], (lo, hi)
got = w.get_object(Bucket=bucket, Key="ssec/3071", Range="bytes=100-199", **sse1)
assert got["Body"].read() == sealed["ssec/3071"][100:200]
# The errors: no key, a wrong key, a key for a plain object, a wrong MD5.
for key in ["ssec/3071", f"ssec/{MIB + 1}"]:
    expect_error("InvalidRequest", 400, w.get_object, Bucket=bucket, Key=key)
    expect_error("400", 400, w.head_object, Bucket=bucket, Key=key)
    expect_error("AccessDenied", 403, w.get_object, Bucket=bucket, Key=key, **sse2)
    expect_error("403", 403, w.head_object, Bucket=bucket, Key=key, **sse2)
w.put_object(Bucket=bucket, Key="ssec/plain", Body=b"in clear")
expect_error("InvalidRequest", 400, w.get_object, Bucket=bucket, Key="ssec/plain", **sse1)
expect_error("400", 400, w.head_object, Bucket=bucket, Key="ssec/plain", **sse1)
k1_b64 = base64.b64encode(k1).decode()
wrong_md5 = base64.b64encode(hashlib.md5(k2).digest()).decode()
expect_error("InvalidArgument", 400, w.put_object, Bucket=bucket, Key="ssec/bad", Body=b"x",
             SSECustomerAlgorithm="AES256", SSECustomerKey=k1_b64, SSECustomerKeyMD5=wrong_md5)
expect_error("InvalidArgument", 400, w.get_object, Bucket=bucket, Key="ssec/1",
             SSECustomerAlgorithm="AES256", SSECustomerKey=k1_b64, SSECustomerKeyMD5=wrong_md5)
# Copies: to a plain object, to another key, to the same key (blocks
# shared), and of a plain object to an encrypted one.
for size in [3000, 2 * MIB + 3]:
    src_data = os.urandom(size)
    w.put_object(Bucket=bucket, Key="ssec/src", Body=src_data, **sse1)
    src = {"Bucket": bucket, "Key": "ssec/src"}
    csse1 = {"CopySourceSSECustomerAlgorithm": "AES256", "CopySourceSSECustomerKey": k1}
    expect_error("InvalidRequest", 400, w.copy_object, Bucket=bucket, Key="ssec/c", CopySource=src)
    expect_error("AccessDenied", 403, w.copy_object, Bucket=bucket, Key="ssec/c", CopySource=src,
                 CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=k2)
    w.copy_object(Bucket=bucket, Key="ssec/c-plain", CopySource=src, **csse1)
    assert readers[-1].get_object(Bucket=bucket, Key="ssec/c-plain")["Body"].read() == src_data
    c = w.copy_object(Bucket=bucket, Key="ssec/c-k2", CopySource=src, **csse1, **sse2)
    assert c["SSECustomerKeyMD5"] == base64.b64encode(hashlib.md5(k2).digest()).decode(), c
    assert readers[-1].get_object(Bucket=bucket, Key="ssec/c-k2", **sse2)["Body"].read() == src_data
    expect_error("AccessDenied", 403, w.get_object, Bucket=bucket, Key="ssec/c-k2", **sse1)
    w.copy_object(Bucket=bucket, Key="ssec/c-k1", CopySource=src, **csse1, **sse1)
    assert readers[-1].get_object(Bucket=bucket, Key="ssec/c-k1", **sse1)["Body"].read() == src_data
    expect_error("InvalidRequest", 400, w.get_object, Bucket=bucket, Key="ssec/c-k1")
    w.copy_object(Bucket=bucket, Key="ssec/c-back", CopySource={"Bucket": bucket, "Key": "ssec/c-plain"}, **sse2)
    assert readers[-1].get_object(Bucket=bucket, Key="ssec/c-back", **sse2)["Body"].read() == src_data
    # Key rotation in place.
    w.copy_object(Bucket=bucket, Key="ssec/src", CopySource=src, **csse1, **sse2)
    assert w.get_object(Bucket=bucket, Key="ssec/src", **sse2)["Body"].read() == src_data
# A multipart SSE-C upload, with a part copied from an SSE-C object.
mp = [os.urandom(5 * MIB), os.urandom(5 * MIB + 1024)]
up = w.create_multipart_upload(Bucket=bucket, Key="ssec/mp", **sse1)
assert up["SSECustomerKeyMD5"] == k1_md5, up
uid = up["UploadId"]
expect_error("InvalidRequest", 400, w.upload_part, Bucket=bucket, Key="ssec/mp", UploadId=uid,
             PartNumber=1, Body=mp[0])
expect_error("InvalidArgument", 400, w.upload_part, Bucket=bucket, Key="ssec/mp", UploadId=uid,
             PartNumber=1, Body=mp[0], **sse2)
parts = []
for n, d in enumerate(mp, start=1):
    p = w.upload_part(Bucket=bucket, Key="ssec/mp", UploadId=uid, PartNumber=n, Body=d, **sse1)
    parts.append({"PartNumber": n, "ETag": p["ETag"]})
pc = w.upload_part_copy(Bucket=bucket, Key="ssec/mp", UploadId=uid, PartNumber=3,
                        CopySource={"Bucket": bucket, "Key": "ssec/src"}, CopySourceRange="bytes=1-1000",
                        CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=k2, **sse1)
parts.append({"PartNumber": 3, "ETag": pc["CopyPartResult"]["ETag"]})
w.complete_multipart_upload(Bucket=bucket, Key="ssec/mp", UploadId=uid, MultipartUpload={"Parts": parts})
whole = mp[0] + mp[1] + src_data[1:1001]
for r in readers:
    got = r.get_object(Bucket=bucket, Key="ssec/mp", **sse1)
    assert got["ContentLength"] == len(whole) and sha(got["Body"].read()) == sha(whole)
lo = 5 * MIB - 3
got = w.get_object(Bucket=bucket, Key="ssec/mp", Range=f"bytes={lo}-{lo + 9}", **sse1)
assert got["Body"].read() == whole[lo:lo + 10]
expect_error("InvalidRequest", 400, w.get_object, Bucket=bucket, Key="ssec/mp")
# The controls for tests/e2e/s3.rs's grep: in clear in a block, and inline.
w.put_object(Bucket=bucket, Key="ssec/control", Body=marked(MIB + 100, PLAIN_MARKER))
w.put_object(Bucket=bucket, Key="ssec/control-small", Body=marked(100, PLAIN_MARKER))
print("SSE-C: ok", flush=True)

# Deletes.
expect_error("BucketNotEmpty", 409, w.delete_bucket, Bucket=bucket)
w.delete_object(Bucket=bucket, Key="sizes/1")
expect_error("NoSuchKey", 404, readers[-1].get_object, Bucket=bucket, Key="sizes/1")
res = w.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "l/a"}, {"Key": "l/c"}]})
assert sorted(d["Key"] for d in res["Deleted"]) == ["l/a", "l/c"], res
quiet = w.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "l/e"}], "Quiet": True})
assert not quiet.get("Deleted"), quiet

# Authentication.
expect_error("InvalidAccessKeyId", 403, client(endpoints[0], key="GK000000000000000000000000").list_buckets)
expect_error("SignatureDoesNotMatch", 403, client(endpoints[0], sec="0" * 64).list_buckets)
anon = boto3.client("s3", endpoint_url=endpoints[0], region_name="garage",
                    config=Config(signature_version=__import__("botocore").UNSIGNED))
expect_error("AccessDenied", 403, anon.list_objects_v2, Bucket=bucket)
print("boto3 suite: all checks passed")
