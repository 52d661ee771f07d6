"""Access control (issue 17, item 5) with boto3, every answer checked with
its code and status: canned ACLs of objects and buckets, Get/Put*Acl,
anonymous requests (unsigned), bucket policies (Allow, Deny, principals,
actions, resources, conditions on aws:SourceIp, s3:prefix and
aws:SecureTransport), the policy status, ownership controls and the
public access block.

usage: access.py KEY_ID SECRET ENDPOINT...
GARAGE_TEST_OTHER=ID:SECRET: a key with no permission on the bucket.
With several endpoints, changes are made through one node and checked
through another (waiting for the bucket entry to arrive there). With
GARAGE_TEST_PAUSE, the script pauses after its setup (a node is killed).
Prints "all access control checks passed" at the end.
"""

import json
import os
import sys

import boto3
from botocore import UNSIGNED
from botocore.client import Config
from botocore.exceptions import ClientError

from s3util import client, expect_error, pause, wait_for

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
B = "acl-test"


def anonymous(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="garage",
        config=Config(
            signature_version=UNSIGNED,
            retries={"max_attempts": 1},
            s3={"addressing_style": "path"},
        ),
    )


def status(f, *a, **kw):
    """The HTTP status `f` answers (200 on success)."""
    try:
        f(*a, **kw)
        return 200
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"]


def main():
    key_id, secret = sys.argv[1], sys.argv[2]
    endpoints = sys.argv[3:]
    other_id, other_secret = os.environ["GARAGE_TEST_OTHER"].split(":")
    owners = [client(e, key_id, secret) for e in endpoints]
    others = [client(e, other_id, other_secret) for e in endpoints]
    anons = [anonymous(e) for e in endpoints]
    # Changes through `s`, checks through `c`, `o` (other key), `a`
    # (anonymous): another node when there are several.
    s = owners[0]
    c, o, a = owners[-1], others[-1], anons[-1]

    def eventually(what, f, *args, want=200, **kw):
        """`f` answers `want` once the change made through `s` reached
        the checking node."""
        wait_for(what, lambda: status(f, *args, **kw) == want)

    # New buckets have AWS's default ownership setting: ACLs disabled.
    s.create_bucket(Bucket=B + "-default")
    got = s.get_bucket_ownership_controls(Bucket=B + "-default")["OwnershipControls"]["Rules"]
    assert got == [{"ObjectOwnership": "BucketOwnerEnforced"}], got
    expect_error("AccessControlListNotSupported", 400, s.put_object, Bucket=B + "-default",
                 Key="x", Body=b"x", ACL="public-read")
    s.put_object(Bucket=B + "-default", Key="x", Body=b"x", ACL="bucket-owner-full-control")
    s.delete_object(Bucket=B + "-default", Key="x")
    s.delete_bucket(Bucket=B + "-default")
    # This one keeps ACLs, asked for at creation.
    s.create_bucket(Bucket=B, ObjectOwnership="ObjectWriter")
    s.put_object(Bucket=B, Key="private.txt", Body=b"private")
    s.put_object(Bucket=B, Key="public.txt", Body=b"public", ACL="public-read")
    s.put_object(Bucket=B, Key="auth.txt", Body=b"auth", ACL="authenticated-read")
    s.put_object(Bucket=B, Key="pub/page.html", Body=b"<p>hi</p>")
    s.put_object(Bucket=B, Key="keep/log", Body=b"log")
    pause()

    # --- Object ACLs and anonymous reads -------------------------------
    eventually("the public object", a.get_object, Bucket=B, Key="public.txt")
    assert a.get_object(Bucket=B, Key="public.txt")["Body"].read() == b"public"
    a.head_object(Bucket=B, Key="public.txt")
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="private.txt")
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="auth.txt")
    # A missing key is AccessDenied too: no listing, no learning of keys.
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="missing.txt")
    assert o.get_object(Bucket=B, Key="auth.txt")["Body"].read() == b"auth"
    expect_error("AccessDenied", 403, o.get_object, Bucket=B, Key="private.txt")
    # Nothing else anonymous.
    expect_error("AccessDenied", 403, a.list_objects_v2, Bucket=B)
    expect_error("AccessDenied", 403, a.put_object, Bucket=B, Key="x", Body=b"x")
    expect_error("AccessDenied", 403, a.delete_object, Bucket=B, Key="public.txt")
    expect_error("AccessDenied", 403, a.list_buckets)
    expect_error("AccessDenied", 403, a.create_bucket, Bucket="anon-bucket")
    expect_error("AccessDenied", 403, a.get_bucket_acl, Bucket=B)
    expect_error("AccessDenied", 403, a.get_object_tagging, Bucket=B, Key="public.txt")
    expect_error("NoSuchBucket", 404, a.get_object, Bucket="no-such-bucket", Key="k")
    # The other key has no permission on the bucket's configuration.
    expect_error("AccessDenied", 403, o.get_bucket_acl, Bucket=B)
    expect_error("AccessDenied", 403, o.put_bucket_policy, Bucket=B, Policy="{}")
    expect_error("AccessDenied", 403, o.put_object_acl, Bucket=B, Key="public.txt",
                 ACL="private")

    acl = c.get_object_acl(Bucket=B, Key="public.txt")
    assert acl["Owner"]["ID"] == key_id, acl
    grants = {(g["Grantee"].get("URI") or g["Grantee"].get("ID"), g["Permission"])
              for g in acl["Grants"]}
    assert grants == {(key_id, "FULL_CONTROL"), (ALL_USERS, "READ")}, grants
    acl = c.get_object_acl(Bucket=B, Key="private.txt")
    assert [g["Permission"] for g in acl["Grants"]] == ["FULL_CONTROL"], acl

    s.put_object_acl(Bucket=B, Key="private.txt", ACL="public-read")
    eventually("an object made public", a.get_object, Bucket=B, Key="private.txt")
    s.put_object_acl(Bucket=B, Key="private.txt", ACL="private")
    eventually("an object made private", a.get_object, Bucket=B, Key="private.txt", want=403)
    # A grant list that amounts to a canned ACL.
    s.put_object_acl(Bucket=B, Key="private.txt", AccessControlPolicy={
        "Owner": {"ID": key_id},
        "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": key_id}, "Permission": "FULL_CONTROL"},
            {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"},
        ]})
    eventually("an object made public by grants", a.get_object, Bucket=B, Key="private.txt")
    s.put_object_acl(Bucket=B, Key="private.txt", GrantRead=f'id="{key_id}"')
    eventually("grants to the owner only", a.get_object, Bucket=B, Key="private.txt", want=403)
    expect_error("UnresolvableGrantByEmailAddress", 400, s.put_object_acl, Bucket=B,
                 Key="private.txt", GrantRead='emailAddress="someone@example.com"')
    expect_error("InvalidArgument", 400, s.put_object, Bucket=B, Key="x", Body=b"x",
                 ACL="everyone")
    expect_error("NoSuchKey", 404, s.put_object_acl, Bucket=B, Key="missing.txt",
                 ACL="public-read")
    # Copies and multipart uploads take the request's ACL, not the
    # source's.
    s.copy_object(Bucket=B, Key="copy.txt", CopySource={"Bucket": B, "Key": "public.txt"})
    s.copy_object(Bucket=B, Key="copy-pub.txt", ACL="public-read",
                  CopySource={"Bucket": B, "Key": "private.txt"})
    up = s.create_multipart_upload(Bucket=B, Key="mpu.txt", ACL="public-read")
    p1 = s.upload_part(Bucket=B, Key="mpu.txt", UploadId=up["UploadId"], PartNumber=1,
                       Body=b"multipart")
    s.complete_multipart_upload(Bucket=B, Key="mpu.txt", UploadId=up["UploadId"],
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}]})
    eventually("a public copy", a.get_object, Bucket=B, Key="copy-pub.txt")
    eventually("a public multipart object", a.get_object, Bucket=B, Key="mpu.txt")
    assert a.get_object(Bucket=B, Key="mpu.txt")["Body"].read() == b"multipart"
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="copy.txt")

    # --- Bucket ACLs ----------------------------------------------------
    acl = c.get_bucket_acl(Bucket=B)
    assert acl["Owner"]["ID"] == key_id
    assert {(g["Grantee"].get("ID"), g["Permission"]) for g in acl["Grants"]} == {
        (key_id, "FULL_CONTROL")}, acl
    s.put_bucket_acl(Bucket=B, ACL="public-read")
    eventually("a bucket made public", a.list_objects_v2, Bucket=B)
    keys = [x["Key"] for x in a.list_objects_v2(Bucket=B)["Contents"]]
    assert "private.txt" in keys, keys
    a.head_bucket(Bucket=B)
    # Listing, not reading (as on S3): objects keep their own ACL.
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="private.txt")
    expect_error("AccessDenied", 403, a.put_object, Bucket=B, Key="x", Body=b"x")
    acl = c.get_bucket_acl(Bucket=B)
    assert (ALL_USERS, "READ") in {(g["Grantee"].get("URI"), g["Permission"])
                                   for g in acl["Grants"]}, acl
    s.put_bucket_acl(Bucket=B, ACL="public-read-write")
    eventually("a bucket made writable", a.put_object, Bucket=B, Key="drop/anon.txt",
               Body=b"anonymous")
    assert c.get_object(Bucket=B, Key="drop/anon.txt")["Body"].read() == b"anonymous"
    a.delete_object(Bucket=B, Key="drop/anon.txt")
    s.put_bucket_acl(Bucket=B, ACL="private")
    eventually("a bucket made private", a.list_objects_v2, Bucket=B, want=403)

    # --- Grants to keys (canonical ids are access key ids) ---------------
    s.put_bucket_acl(Bucket=B, GrantRead=f'id="{other_id}"')
    eventually("a READ grant to the other key", o.list_objects_v2, Bucket=B)
    assert o.get_object(Bucket=B, Key="private.txt")["Body"].read() == b"private"
    expect_error("AccessDenied", 403, o.put_object, Bucket=B, Key="o.txt", Body=b"o")
    acl = c.get_bucket_acl(Bucket=B)
    assert acl["Owner"]["DisplayName"] == "acl-owner", acl
    got = {(g["Grantee"].get("ID"), g["Grantee"].get("DisplayName"), g["Permission"])
           for g in acl["Grants"]}
    assert (other_id, "acl-other", "READ") in got, got
    assert (key_id, "acl-owner", "FULL_CONTROL") in got, got
    s.put_bucket_acl(Bucket=B, AccessControlPolicy={
        "Owner": {"ID": key_id},
        "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": key_id}, "Permission": "FULL_CONTROL"},
                   {"Grantee": {"Type": "CanonicalUser", "ID": other_id}, "Permission": "WRITE"}]})
    eventually("a WRITE grant to the other key", o.put_object, Bucket=B, Key="o.txt", Body=b"o")
    expect_error("AccessDenied", 403, o.get_object, Bucket=B, Key="private.txt")
    expect_error("InvalidArgument", 400, s.put_bucket_acl, Bucket=B, GrantRead='id="GKnosuchkey"')
    expect_error("UnresolvableGrantByEmailAddress", 400, s.put_bucket_acl, Bucket=B,
                 GrantRead='emailAddress="nobody@example.com"')
    # Grant headers on object writes.
    s.put_object(Bucket=B, Key="granted.txt", Body=b"g", GrantRead=f'uri="{ALL_USERS}"',
                 GrantFullControl=f'id="{key_id}"')
    eventually("an object made public by a grant header", a.get_object, Bucket=B,
               Key="granted.txt")
    expect_error("InvalidRequest", 400, s.put_object, Bucket=B, Key="g3.txt", Body=b"g",
                 ACL="public-read", GrantRead=f'uri="{ALL_USERS}"')
    c.delete_object(Bucket=B, Key="granted.txt")
    # A canned ACL leaves the keys' grants; a grant list replaces them
    # (the owner keeps its own).
    s.put_bucket_acl(Bucket=B, ACL="private")
    assert status(o.put_object, Bucket=B, Key="o2.txt", Body=b"o") == 200
    s.put_bucket_acl(Bucket=B, AccessControlPolicy={"Owner": {"ID": key_id}, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": key_id}, "Permission": "FULL_CONTROL"}]})
    eventually("the grants taken back", o.put_object, Bucket=B, Key="o3.txt", Body=b"o",
               want=403)
    c.delete_object(Bucket=B, Key="o2.txt")
    c.delete_object(Bucket=B, Key="o.txt")

    # --- Grants to other keys on objects (kept in the version's ACL) ----
    # The other key has no permission on the bucket now.
    s.put_object_acl(Bucket=B, Key="private.txt", GrantRead=f'id="{other_id}"')
    eventually("a READ grant on an object", o.get_object, Bucket=B, Key="private.txt")
    assert o.get_object(Bucket=B, Key="private.txt")["Body"].read() == b"private"
    o.head_object(Bucket=B, Key="private.txt")
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="private.txt")
    expect_error("AccessDenied", 403, o.get_object, Bucket=B, Key="auth-not-granted.txt")
    expect_error("AccessDenied", 403, o.list_objects_v2, Bucket=B)
    expect_error("AccessDenied", 403, o.get_object_acl, Bucket=B, Key="private.txt")
    expect_error("AccessDenied", 403, o.put_object_acl, Bucket=B, Key="private.txt",
                 ACL="public-read")
    # A refusal tells nothing of which keys exist.
    expect_error("AccessDenied", 403, o.put_object_acl, Bucket=B, Key="private.txt",
                 GrantRead='id="GKnosuchkey"')
    expect_error("AccessDenied", 403, o.put_object, Bucket=B, Key="private.txt", Body=b"x")
    acl = c.get_object_acl(Bucket=B, Key="private.txt")
    got = {(g["Grantee"].get("ID"), g["Grantee"].get("DisplayName"), g["Permission"])
           for g in acl["Grants"]}
    assert got == {(key_id, "acl-owner", "FULL_CONTROL"), (other_id, "acl-other", "READ")}, got
    # READ_ACP and WRITE_ACP: the other key reads the ACL and replaces it.
    s.put_object_acl(Bucket=B, Key="private.txt", AccessControlPolicy={
        "Owner": {"ID": key_id},
        "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": other_id}, "Permission": "READ_ACP"},
            {"Grantee": {"Type": "CanonicalUser", "ID": other_id}, "Permission": "WRITE_ACP"},
        ]})
    eventually("READ_ACP on an object", o.get_object_acl, Bucket=B, Key="private.txt")
    got = {(g["Grantee"].get("ID"), g["Permission"])
           for g in o.get_object_acl(Bucket=B, Key="private.txt")["Grants"]}
    assert got == {(key_id, "FULL_CONTROL"), (other_id, "READ_ACP"), (other_id, "WRITE_ACP")}, got
    expect_error("AccessDenied", 403, o.get_object, Bucket=B, Key="private.txt")
    o.put_object_acl(Bucket=B, Key="private.txt", GrantRead=f'id="{other_id}"')
    eventually("a READ grant the other key gave itself", o.get_object, Bucket=B,
               Key="private.txt")
    # Its grant list replaced the ACP grants.
    expect_error("AccessDenied", 403, o.put_object_acl, Bucket=B, Key="private.txt",
                 ACL="public-read")
    # FULL_CONTROL on a write's grant header: read, and change the ACL.
    s.put_object(Bucket=B, Key="for-other.txt", Body=b"for you",
                 GrantFullControl=f'id="{other_id}"')
    eventually("FULL_CONTROL on a new object", o.get_object, Bucket=B, Key="for-other.txt")
    o.put_object_acl(Bucket=B, Key="for-other.txt", ACL="public-read")
    eventually("an object made public by a grantee", a.get_object, Bucket=B,
               Key="for-other.txt")
    # A copy or an upload takes its own grants.
    s.copy_object(Bucket=B, Key="copy-other.txt", GrantRead=f'id="{other_id}"',
                  CopySource={"Bucket": B, "Key": "public.txt"})
    up = s.create_multipart_upload(Bucket=B, Key="mpu-other.txt", GrantRead=f'id="{other_id}"')
    p1 = s.upload_part(Bucket=B, Key="mpu-other.txt", UploadId=up["UploadId"], PartNumber=1,
                       Body=b"multipart for you")
    s.complete_multipart_upload(Bucket=B, Key="mpu-other.txt", UploadId=up["UploadId"],
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}]})
    eventually("a copy granted to the other key", o.get_object, Bucket=B, Key="copy-other.txt")
    eventually("an upload granted to the other key", o.get_object, Bucket=B,
               Key="mpu-other.txt")
    assert o.get_object(Bucket=B, Key="mpu-other.txt")["Body"].read() == b"multipart for you"
    expect_error("InvalidArgument", 400, s.put_object_acl, Bucket=B, Key="private.txt",
                 GrantRead='id="GKnosuchkey"')
    expect_error("InvalidArgument", 400, s.put_object, Bucket=B, Key="g2.txt", Body=b"g",
                 GrantRead='id="GKnosuchkey"')
    expect_error("InvalidArgument", 400, s.put_object_acl, Bucket=B, Key="private.txt",
                 GrantWrite=f'id="{other_id}"')
    # A canned ACL replaces the grants.
    s.put_object_acl(Bucket=B, Key="private.txt", ACL="private")
    eventually("an object's grants taken back", o.get_object, Bucket=B, Key="private.txt",
               want=403)
    for k in ["for-other.txt", "copy-other.txt", "mpu-other.txt"]:
        c.delete_object(Bucket=B, Key=k)

    # --- Bucket policies ------------------------------------------------
    expect_error("NoSuchBucketPolicy", 404, c.get_bucket_policy, Bucket=B)
    expect_error("NoSuchBucketPolicy", 404, c.get_bucket_policy_status, Bucket=B)

    def policy(*statements):
        return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})

    p = policy(
        {"Sid": "PublicPages", "Effect": "Allow", "Principal": "*",
         "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{B}/pub/*"},
        {"Sid": "ListPub", "Effect": "Allow", "Principal": {"AWS": "*"},
         "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{B}",
         "Condition": {"StringLike": {"s3:prefix": ["pub/*"]}}},
        {"Sid": "Inbox", "Effect": "Allow", "Principal": {"AWS": [other_id]},
         "Action": ["s3:PutObject", "s3:Get*"], "Resource": f"arn:aws:s3:::{B}/inbox/*"},
        {"Sid": "KeepLogs", "Effect": "Deny", "Principal": {"AWS": key_id},
         "Action": "s3:Delete*", "Resource": f"arn:aws:s3:::{B}/keep/*"},
        {"Sid": "FromTen", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{B}/ten/*",
         "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}},
        {"Sid": "FromLoopback", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{B}/lo/*",
         "Condition": {"IpAddress": {"aws:SourceIp": ["127.0.0.0/8", "::1/128"]}}},
    )
    s.put_bucket_policy(Bucket=B, Policy=p)
    eventually("the policy", c.get_bucket_policy, Bucket=B)
    assert json.loads(c.get_bucket_policy(Bucket=B)["Policy"]) == json.loads(p)
    assert c.get_bucket_policy_status(Bucket=B)["PolicyStatus"]["IsPublic"] is True
    s.put_object(Bucket=B, Key="ten/x", Body=b"ten")
    s.put_object(Bucket=B, Key="lo/x", Body=b"loopback")
    eventually("the policy's public pages", a.get_object, Bucket=B, Key="pub/page.html")
    assert a.get_object(Bucket=B, Key="pub/page.html")["Body"].read() == b"<p>hi</p>"
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="private.txt")
    expect_error("AccessDenied", 403, a.put_object, Bucket=B, Key="pub/x", Body=b"x")
    # s3:prefix
    listed = a.list_objects_v2(Bucket=B, Prefix="pub/")["Contents"]
    assert [x["Key"] for x in listed] == ["pub/page.html"], listed
    expect_error("AccessDenied", 403, a.list_objects_v2, Bucket=B)
    expect_error("AccessDenied", 403, a.list_objects_v2, Bucket=B, Prefix="keep/")
    # Principals by key id, and wildcard actions.
    o.put_object(Bucket=B, Key="inbox/from-other", Body=b"hello")
    assert o.get_object(Bucket=B, Key="inbox/from-other")["Body"].read() == b"hello"
    expect_error("AccessDenied", 403, o.put_object, Bucket=B, Key="elsewhere", Body=b"x")
    expect_error("AccessDenied", 403, o.delete_object, Bucket=B, Key="inbox/from-other")
    expect_error("AccessDenied", 403, a.put_object, Bucket=B, Key="inbox/anon", Body=b"x")
    # An explicit deny wins over the key's own permission.
    expect_error("AccessDenied", 403, c.delete_object, Bucket=B, Key="keep/log")
    r = c.delete_objects(Bucket=B, Delete={"Objects": [{"Key": "keep/log"}, {"Key": "lo/gone"}]})
    assert [e["Key"] for e in r.get("Errors", [])] == ["keep/log"], r
    assert r["Errors"][0]["Code"] == "AccessDenied", r
    assert [d["Key"] for d in r["Deleted"]] == ["lo/gone"], r
    assert c.get_object(Bucket=B, Key="keep/log")["Body"].read() == b"log"
    # aws:SourceIp: the tests connect over 127.0.0.0/8.
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="ten/x")
    assert a.get_object(Bucket=B, Key="lo/x")["Body"].read() == b"loopback"
    # aws:SecureTransport: garage serves plain HTTP, so a deny of
    # insecure transport denies every request it names.
    s.put_bucket_policy(Bucket=B, Policy=policy(
        {"Effect": "Allow", "Principal": {"AWS": other_id}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{B}/*"},
        {"Effect": "Deny", "Principal": {"AWS": other_id}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{B}/private.txt",
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}}))
    eventually("the second policy", o.get_object, Bucket=B, Key="pub/page.html")
    expect_error("AccessDenied", 403, o.get_object, Bucket=B, Key="private.txt")
    assert c.get_bucket_policy_status(Bucket=B)["PolicyStatus"]["IsPublic"] is False
    expect_error("AccessDenied", 403, a.get_object, Bucket=B, Key="pub/page.html")
    # Malformed policies, named.
    for bad, why in [
        ("{not json", "valid JSON"),
        (policy({"Effect": "Allow", "Principal": "*", "Action": "s3:Fly",
                 "Resource": f"arn:aws:s3:::{B}/*"}), "invalid action"),
        (policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                 "Resource": "arn:aws:s3:::another-bucket/*"}), "invalid resource"),
        (policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                 "Resource": f"arn:aws:s3:::{B}/*",
                 "Condition": {"StringEquals": {"aws:SourceVpc": "vpc-1"}}}), "aws:SourceVpc"),
        (json.dumps({"Version": "2012-10-17"}), "Statement"),
    ]:
        e = expect_error("MalformedPolicy", 400, s.put_bucket_policy, Bucket=B, Policy=bad)
        assert why in e.response["Error"]["Message"], (why, e.response["Error"])
    r = s.delete_bucket_policy(Bucket=B)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    expect_error("NoSuchBucketPolicy", 404, s.get_bucket_policy, Bucket=B)
    eventually("the policy's removal", o.get_object, Bucket=B, Key="pub/page.html", want=403)

    # --- Ownership controls --------------------------------------------
    got = c.get_bucket_ownership_controls(Bucket=B)["OwnershipControls"]["Rules"]
    assert got == [{"ObjectOwnership": "ObjectWriter"}], got
    enforced = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    s.put_bucket_acl(Bucket=B, ACL="public-read")
    expect_error("InvalidBucketAclWithObjectOwnership", 400, s.put_bucket_ownership_controls,
                 Bucket=B, OwnershipControls=enforced)
    s.put_bucket_acl(Bucket=B, ACL="private")
    s.put_bucket_ownership_controls(Bucket=B, OwnershipControls=enforced)
    eventually("the ownership controls", c.get_bucket_ownership_controls, Bucket=B)
    got = c.get_bucket_ownership_controls(Bucket=B)["OwnershipControls"]["Rules"]
    assert got == [{"ObjectOwnership": "BucketOwnerEnforced"}], got
    eventually("ACLs disabled", a.get_object, Bucket=B, Key="public.txt", want=403)
    expect_error("AccessControlListNotSupported", 400, s.put_object, Bucket=B, Key="x",
                 Body=b"x", ACL="public-read")
    expect_error("AccessControlListNotSupported", 400, s.put_bucket_acl, Bucket=B,
                 ACL="public-read")
    expect_error("AccessControlListNotSupported", 400, s.put_object_acl, Bucket=B,
                 Key="public.txt", ACL="public-read")
    s.put_object(Bucket=B, Key="owned.txt", Body=b"x", ACL="bucket-owner-full-control")
    assert c.get_bucket_acl(Bucket=B)["Owner"]["ID"] == key_id
    expect_error("MalformedXML", 400, s.put_bucket_ownership_controls, Bucket=B,
                 OwnershipControls={"Rules": [{"ObjectOwnership": "Nobody"}]})
    r = s.delete_bucket_ownership_controls(Bucket=B)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    eventually("ACLs enabled again", a.get_object, Bucket=B, Key="public.txt")

    # --- Public access block --------------------------------------------
    expect_error("NoSuchPublicAccessBlockConfiguration", 404, c.get_public_access_block,
                 Bucket=B)
    s.put_public_access_block(Bucket=B, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": False,
        "BlockPublicPolicy": True, "RestrictPublicBuckets": False})
    eventually("the public access block", c.get_public_access_block, Bucket=B)
    got = c.get_public_access_block(Bucket=B)["PublicAccessBlockConfiguration"]
    assert got == {"BlockPublicAcls": True, "IgnorePublicAcls": False,
                   "BlockPublicPolicy": True, "RestrictPublicBuckets": False}, got
    expect_error("AccessDenied", 403, s.put_object, Bucket=B, Key="x", Body=b"x",
                 ACL="public-read")
    expect_error("AccessDenied", 403, s.put_object_acl, Bucket=B, Key="private.txt",
                 ACL="public-read")
    expect_error("AccessDenied", 403, s.put_bucket_acl, Bucket=B, ACL="public-read")
    public = policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                     "Resource": f"arn:aws:s3:::{B}/pub/*"})
    expect_error("AccessDenied", 403, s.put_bucket_policy, Bucket=B, Policy=public)
    s.put_bucket_policy(Bucket=B, Policy=policy(
        {"Effect": "Allow", "Principal": {"AWS": other_id}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{B}/pub/*"}))
    # Existing public ACLs still grant until IgnorePublicAcls.
    a.get_object(Bucket=B, Key="public.txt")
    s.put_public_access_block(Bucket=B, PublicAccessBlockConfiguration={
        "IgnorePublicAcls": True, "RestrictPublicBuckets": True})
    eventually("public ACLs ignored", a.get_object, Bucket=B, Key="public.txt", want=403)
    s.delete_public_access_block(Bucket=B)
    s.put_bucket_policy(Bucket=B, Policy=public)
    eventually("the public policy", a.get_object, Bucket=B, Key="pub/page.html")
    s.put_public_access_block(Bucket=B, PublicAccessBlockConfiguration={
        "RestrictPublicBuckets": True})
    eventually("a public policy restricted", a.get_object, Bucket=B, Key="pub/page.html",
               want=403)
    r = s.delete_public_access_block(Bucket=B)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    eventually("the public policy again", a.get_object, Bucket=B, Key="pub/page.html")
    expect_error("NoSuchPublicAccessBlockConfiguration", 404, s.get_public_access_block,
                 Bucket=B)
    # The state the test leaves, for `garage bucket info`.
    s.put_bucket_acl(Bucket=B, ACL="public-read")
    print("all access control checks passed", flush=True)


if __name__ == "__main__":
    main()
