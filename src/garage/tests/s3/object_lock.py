"""Object lock with boto3, run by tests/e2e/s3_object_lock.rs: a bucket created
with object lock, the lock configuration and its default retention,
GOVERNANCE and COMPLIANCE retention from headers and from the default, legal
holds, retention changes, bypassing governance (owner only), multipart
uploads and copies with lock headers, DeleteObjects by version id, and
DeleteBucket refused while locked versions remain. Each error case is
checked for AWS's code and status.

Usage: object_lock.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Writes go through the first endpoint; reads through each endpoint in turn.
GARAGE_TEST_WRITER=ID:SECRET is a key with read and write (not owner)
permission on the bucket `lockable` (which the first key owns, created
without object lock). With GARAGE_TEST_PAUSE=DIR, the script pauses after
its first locked writes (a node is killed meanwhile, see s3util.pause).
Prints one "<section>: ok" line per section, then "all object lock checks
passed".
"""
import datetime
import os
import sys

from botocore.exceptions import ClientError

from s3util import client, expect_error, pause, wait_for

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]
w = client(endpoints[0], key_id, secret)
readers = [client(e, key_id, secret) for e in endpoints]
writer_id, writer_secret = os.environ["GARAGE_TEST_WRITER"].split(":", 1)
other = client(endpoints[0], writer_id, writer_secret)
bucket = "locked"
DENIED = ("AccessDenied", 403)


def in_(seconds):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


def on_every_node(what, check):
    """As on AWS, a bucket setting takes a moment to reach every node."""
    for r in readers:
        wait_for(f"{what} on every node", lambda: check(r))


def put(key, data=b"data", b=bucket, **kw):
    return w.put_object(Bucket=b, Key=key, Body=data, **kw)["VersionId"]


def delete_version(key, vid, b=bucket, c=None, **kw):
    return (c or w).delete_object(Bucket=b, Key=key, VersionId=vid, **kw)


def bucket_settings():
    w.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    assert w.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    conf = w.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]
    assert conf == {"ObjectLockEnabled": "Enabled"}, conf
    expect_error("InvalidBucketState", 409, w.put_bucket_versioning, Bucket=bucket,
                 VersioningConfiguration={"Status": "Suspended"})
    bad = [
        ({"Mode": "GOVERNANCE", "Days": 1, "Years": 1}, "MalformedXML", 400),
        ({"Mode": "GOVERNANCE", "Days": 0}, "InvalidArgument", 400),
        ({"Days": 1}, "MalformedXML", 400),
    ]
    for rule, code, status in bad:
        expect_error(code, status, w.put_object_lock_configuration, Bucket=bucket,
                     ObjectLockConfiguration={"ObjectLockEnabled": "Enabled",
                                              "Rule": {"DefaultRetention": rule}})

    # A bucket without object lock: nothing lock-related is accepted
    # until versioning is enabled and the lock switched on.
    lb = "lockable"
    expect_error("ObjectLockConfigurationNotFoundError", 404,
                 w.get_object_lock_configuration, Bucket=lb)
    expect_error("InvalidRequest", 400, w.put_object, Bucket=lb, Key="k", Body=b"x",
                 ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=in_(3600))
    expect_error("InvalidRequest", 400, w.put_object, Bucket=lb, Key="k", Body=b"x",
                 ObjectLockLegalHoldStatus="ON")
    w.put_object(Bucket=lb, Key="k", Body=b"x")
    expect_error("InvalidRequest", 400, w.put_object_retention, Bucket=lb, Key="k",
                 Retention={"Mode": "GOVERNANCE", "RetainUntilDate": in_(3600)})
    lock_conf = {"ObjectLockEnabled": "Enabled",
                 "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}}
    expect_error("InvalidBucketState", 409, w.put_object_lock_configuration, Bucket=lb,
                 ObjectLockConfiguration=lock_conf)
    w.put_bucket_versioning(Bucket=lb, VersioningConfiguration={"Status": "Enabled"})
    on_every_node("versioning", lambda r: r.get_bucket_versioning(Bucket=lb).get("Status") == "Enabled")
    # Only the owner may configure the lock.
    expect_error(*DENIED, other.put_object_lock_configuration, Bucket=lb,
                 ObjectLockConfiguration=lock_conf)
    w.put_object_lock_configuration(Bucket=lb, ObjectLockConfiguration=lock_conf)
    on_every_node("lock configuration", lambda r: "Rule" in r.get_object_lock_configuration(
        Bucket=lb)["ObjectLockConfiguration"])
    got = w.get_object_lock_configuration(Bucket=lb)["ObjectLockConfiguration"]
    assert got == lock_conf, got
    print("bucket settings: ok", flush=True)


def governance_and_bypass():
    """`lockable` has a default GOVERNANCE retention of one day: a plain
    PUT is locked; the writer key cannot bypass it, the owner can."""
    lb = "lockable"
    vid = put("gov", b"governed", b=lb)
    before = datetime.datetime.now(datetime.timezone.utc)
    for r in readers:
        h = r.head_object(Bucket=lb, Key="gov", VersionId=vid)
        assert h["ObjectLockMode"] == "GOVERNANCE", h
        until = h["ObjectLockRetainUntilDate"]
        assert datetime.timedelta(hours=23) < until - before < datetime.timedelta(hours=25), until
    ret = w.get_object_retention(Bucket=lb, Key="gov", VersionId=vid)["Retention"]
    assert ret["Mode"] == "GOVERNANCE", ret
    expect_error(*DENIED, delete_version, "gov", vid, b=lb)
    expect_error(*DENIED, delete_version, "gov", vid, b=lb, c=other,
                 BypassGovernanceRetention=True)
    # Shortening needs the bypass too; extending does not.
    expect_error(*DENIED, w.put_object_retention, Bucket=lb, Key="gov", VersionId=vid,
                 Retention={"Mode": "GOVERNANCE", "RetainUntilDate": in_(60)})
    w.put_object_retention(Bucket=lb, Key="gov", VersionId=vid,
                           Retention={"Mode": "GOVERNANCE", "RetainUntilDate": in_(3 * 86400)})
    w.put_object_retention(Bucket=lb, Key="gov", VersionId=vid, BypassGovernanceRetention=True,
                           Retention={"Mode": "GOVERNANCE", "RetainUntilDate": in_(7200)})
    # A DELETE without a version id only writes a delete marker.
    m = w.delete_object(Bucket=lb, Key="gov")
    assert m["DeleteMarker"], m
    assert w.get_object(Bucket=lb, Key="gov", VersionId=vid)["Body"].read() == b"governed"
    w.delete_object(Bucket=lb, Key="gov", VersionId=m["VersionId"])
    delete_version("gov", vid, b=lb, BypassGovernanceRetention=True)
    expect_error("NoSuchVersion", 404, w.get_object, Bucket=lb, Key="gov", VersionId=vid)
    print("governance and bypass: ok", flush=True)


def first_locked_writes():
    """Versions that the rest of the script checks, written before the
    pause: a COMPLIANCE one, a legal hold, a multipart upload and a copy
    with lock headers."""
    state = {}
    state["comp"] = put("comp", b"compliant", ObjectLockMode="COMPLIANCE",
                        ObjectLockRetainUntilDate=in_(3600))
    state["hold"] = put("hold", b"held", ObjectLockLegalHoldStatus="ON")
    state["plain"] = put("plain", b"free")
    up = w.create_multipart_upload(Bucket=bucket, Key="mpu", ObjectLockMode="GOVERNANCE",
                                   ObjectLockRetainUntilDate=in_(3600))
    part = w.upload_part(Bucket=bucket, Key="mpu", UploadId=up["UploadId"], PartNumber=1,
                         Body=b"m" * 100_000)
    done = w.complete_multipart_upload(
        Bucket=bucket, Key="mpu", UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    state["mpu"] = done["VersionId"]
    state["copy"] = w.copy_object(Bucket=bucket, Key="copy",
                                  CopySource={"Bucket": bucket, "Key": "plain"},
                                  ObjectLockMode="COMPLIANCE",
                                  ObjectLockRetainUntilDate=in_(3600))["VersionId"]
    # Bad lock headers.
    expect_error("InvalidArgument", 400, w.put_object, Bucket=bucket, Key="bad", Body=b"",
                 ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=in_(-60))
    expect_error("InvalidArgument", 400, w.put_object, Bucket=bucket, Key="bad", Body=b"",
                 ObjectLockRetainUntilDate=in_(60))
    print("locked writes: ok", flush=True)
    return state


def locks_hold(s):
    for r in readers:
        h = r.head_object(Bucket=bucket, Key="comp")
        assert h["ObjectLockMode"] == "COMPLIANCE", h
        assert r.get_object_legal_hold(Bucket=bucket, Key="hold")["LegalHold"]["Status"] == "ON"
        assert r.head_object(Bucket=bucket, Key="mpu")["ObjectLockMode"] == "GOVERNANCE"
        assert r.head_object(Bucket=bucket, Key="copy")["ObjectLockMode"] == "COMPLIANCE"
    expect_error("NoSuchObjectLockConfiguration", 404, w.get_object_retention,
                 Bucket=bucket, Key="plain")
    expect_error("NoSuchObjectLockConfiguration", 404, w.get_object_legal_hold,
                 Bucket=bucket, Key="plain")
    # COMPLIANCE: no delete, no shortening, no change to GOVERNANCE, even
    # for the owner asking to bypass; extending is allowed.
    for key in ["comp", "copy"]:
        expect_error(*DENIED, delete_version, key, s[key], BypassGovernanceRetention=True)
    expect_error(*DENIED, w.put_object_retention, Bucket=bucket, Key="comp",
                 VersionId=s["comp"], BypassGovernanceRetention=True,
                 Retention={"Mode": "COMPLIANCE", "RetainUntilDate": in_(60)})
    expect_error(*DENIED, w.put_object_retention, Bucket=bucket, Key="comp",
                 VersionId=s["comp"], BypassGovernanceRetention=True,
                 Retention={"Mode": "GOVERNANCE", "RetainUntilDate": in_(7200)})
    expect_error(*DENIED, w.put_object_retention, Bucket=bucket, Key="comp",
                 VersionId=s["comp"], BypassGovernanceRetention=True, Retention={})
    later = in_(7200).replace(microsecond=0)
    w.put_object_retention(Bucket=bucket, Key="comp", VersionId=s["comp"],
                           Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later})
    for r in readers:
        got = r.get_object_retention(Bucket=bucket, Key="comp", VersionId=s["comp"])["Retention"]
        assert got == {"Mode": "COMPLIANCE", "RetainUntilDate": later}, got
    # A legal hold: no delete, bypass or not, until it is lifted.
    expect_error(*DENIED, delete_version, "hold", s["hold"], BypassGovernanceRetention=True)
    w.put_object_legal_hold(Bucket=bucket, Key="hold", VersionId=s["hold"],
                            LegalHold={"Status": "OFF"})
    assert w.get_object_legal_hold(Bucket=bucket, Key="hold")["LegalHold"]["Status"] == "OFF"
    delete_version("hold", s["hold"])
    # DeleteObjects by version id: locked versions are per-key errors.
    res = w.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "comp", "VersionId": s["comp"]},
        {"Key": "mpu", "VersionId": s["mpu"]},
        {"Key": "plain", "VersionId": s["plain"]},
    ]})
    errs = sorted((e["Key"], e["Code"]) for e in res.get("Errors", []))
    assert errs == [("comp", "AccessDenied"), ("mpu", "AccessDenied")], res
    assert [d["Key"] for d in res.get("Deleted", [])] == ["plain"], res
    # The owner may bypass the multipart upload's GOVERNANCE retention.
    res = w.delete_objects(Bucket=bucket, BypassGovernanceRetention=True, Delete={"Objects": [
        {"Key": "mpu", "VersionId": s["mpu"]}]})
    assert not res.get("Errors"), res
    # Versions under lock keep the bucket.
    expect_error("BucketNotEmpty", 409, w.delete_bucket, Bucket=bucket)
    for r in readers:
        assert r.get_object(Bucket=bucket, Key="comp", VersionId=s["comp"])["Body"].read() == b"compliant"
    print("locks hold: ok", flush=True)


def retention_expires():
    """A COMPLIANCE retention lets its version go once its date passes."""
    vid = put("short", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=in_(2))
    expect_error(*DENIED, delete_version, "short", vid)

    def deleted():
        try:
            delete_version("short", vid)
            return True
        except ClientError:
            return False

    wait_for("the retention to expire", deleted, 30)
    print("retention expires: ok", flush=True)


bucket_settings()
governance_and_bypass()
state = first_locked_writes()
pause()
locks_hold(state)
retention_expires()
print("all object lock checks passed", flush=True)
