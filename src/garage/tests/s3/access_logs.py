"""Server access logging with boto3, run by tests/e2e/s3_logging.rs on one
node and on three zones with node 2 killed at the pause (nodes started
with GARAGE_ACCESS_LOG_FLUSH_SECS=1): Put/GetBucketLogging with a simple
and a partitioned key format, every refusal with AWS's code and status,
the log delivery service accepted as a bucket policy principal, then the
log objects read back from the target bucket: AWS's line format, one line
per request, errors with their code.

Usage: access_logs.py KEY_ID SECRET ENDPOINT [ENDPOINT...]
Prints "all logging checks passed".
"""
import re
import sys

from s3util import client, expect_error, pause, wait_for

key_id, secret, endpoints = sys.argv[1], sys.argv[2], sys.argv[3:]
w = client(endpoints[0], key_id, secret)
src, src2, dst = "log-source", "log-source-2", "log-target"
for b in [src, src2, dst]:
    w.create_bucket(Bucket=b)


def enabled(bucket):
    return w.get_bucket_logging(Bucket=bucket).get("LoggingEnabled")


# Refusals.
assert enabled(src) is None
expect_error("InvalidTargetBucketForLogging", 400, w.put_bucket_logging, Bucket=src,
             BucketLoggingStatus={"LoggingEnabled": {"TargetBucket": "no-such-target",
                                                     "TargetPrefix": "x/"}})
expect_error("MalformedXML", 400, w.put_bucket_logging, Bucket=src,
             BucketLoggingStatus={"LoggingEnabled": {
                 "TargetBucket": dst, "TargetPrefix": "x/",
                 "TargetObjectKeyFormat": {"SimplePrefix": {},
                                           "PartitionedPrefix": {"PartitionDateSource": "EventTime"}}}})
expect_error("NotImplemented", 501, w.put_bucket_logging, Bucket=src,
             BucketLoggingStatus={"LoggingEnabled": {
                 "TargetBucket": dst, "TargetPrefix": "x/",
                 "TargetGrants": [{"Grantee": {"Type": "Group",
                                               "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
                                   "Permission": "READ"}]}})
expect_error("NoSuchBucket", 404, w.put_bucket_logging, Bucket="no-such-source",
             BucketLoggingStatus={"LoggingEnabled": {"TargetBucket": dst, "TargetPrefix": "x/"}})
print("refusals: ok", flush=True)

# The log delivery service is a principal bucket policies may name.
policy = ('{"Version":"2012-10-17","Statement":[{"Effect":"Allow",'
          '"Principal":{"Service":"logging.s3.amazonaws.com"},"Action":"s3:PutObject",'
          f'"Resource":"arn:aws:s3:::{dst}/*"}}]}}')
w.put_bucket_policy(Bucket=dst, Policy=policy)
assert "logging.s3.amazonaws.com" in w.get_bucket_policy(Bucket=dst)["Policy"]
expect_error("MalformedPolicy", 400, w.put_bucket_policy, Bucket=dst,
             Policy=policy.replace("logging.s3.amazonaws.com", "ec2.amazonaws.com"))
print("policy principal: ok", flush=True)

simple = {"TargetBucket": dst, "TargetPrefix": "simple/",
          "TargetObjectKeyFormat": {"SimplePrefix": {}}}
parted = {"TargetBucket": dst, "TargetPrefix": "part/",
          "TargetObjectKeyFormat": {"PartitionedPrefix": {"PartitionDateSource": "EventTime"}}}
w.put_bucket_logging(Bucket=src, BucketLoggingStatus={"LoggingEnabled": simple})
w.put_bucket_logging(Bucket=src2, BucketLoggingStatus={"LoggingEnabled": parted})
assert enabled(src) == simple, enabled(src)
assert enabled(src2) == parted, enabled(src2)
print("put and get: ok", flush=True)

pause()

# Requests to log (the setting takes a moment to reach each node: as on
# AWS, logging starts within a short delay).
wait_for("logging to be on", lambda: bool(enabled(src)))
body = b"logged body"
w.put_object(Bucket=src, Key="a b.txt", Body=body)
assert w.get_object(Bucket=src, Key="a b.txt")["Body"].read() == body
expect_error("NoSuchKey", 404, w.get_object, Bucket=src, Key="missing")
w.put_object(Bucket=src2, Key="p", Body=b"x")


def log_lines(prefix):
    out = []
    for o in w.list_objects_v2(Bucket=dst, Prefix=prefix).get("Contents", []):
        out.extend(w.get_object(Bucket=dst, Key=o["Key"])["Body"].read().decode().splitlines())
    return out


def has(prefix, *parts):
    return any(all(p in line for p in parts) for line in log_lines(prefix))


# Requests made before the setting reached the node are not logged, so
# the test repeats them until a line shows up.
def logged(prefix, bucket, op, key, code, again):
    def check():
        if has(prefix, f" {bucket} ", f" {op} ", f" {key} ", f" {code} "):
            return True
        again()
        return False
    wait_for(f"{op} of {key} in the log", check, 120)


logged("simple/", src, "REST.PUT.OBJECT", "a%20b.txt", "200",
       lambda: w.put_object(Bucket=src, Key="a b.txt", Body=body))
logged("simple/", src, "REST.GET.OBJECT", "missing", "404 NoSuchKey",
       lambda: expect_error("NoSuchKey", 404, w.get_object, Bucket=src, Key="missing"))
logged("part/", src2, "REST.PUT.OBJECT", "p", "200",
       lambda: w.put_object(Bucket=src2, Key="p", Body=b"x"))

line = next(l for l in log_lines("simple/") if " REST.PUT.OBJECT a%20b.txt " in l)
fields = re.match(
    r'^(\S+) (\S+) \[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] (\S+) (\S+) (\S+) (\S+) (\S+) '
    r'"([^"]*)" (\d{3}) (\S+) (\S+) (\S+) (\d+) (\S+) "([^"]*)" "([^"]*)" (\S+) (\S+) (\S+) (\S+) '
    r'(\S+) (\S+) (\S+) (\S+) (\S+)$', line)
assert fields, line
f = fields.groups()
assert f[1] == src and f[4] == key_id and f[6] == "REST.PUT.OBJECT", f
assert f[8].startswith("PUT /") and f[9] == "200" and f[12] == str(len(body)), f
assert f[19] == "SigV4" and f[21] == "AuthHeader", f
keys = [o["Key"] for o in w.list_objects_v2(Bucket=dst, Prefix="part/")["Contents"]]
assert all(re.match(r"^part/[^/]+/garage/log-source-2/\d{4}/\d\d/\d\d/"
                    r"\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-[0-9A-F]{16}$", k) for k in keys), keys
keys = [o["Key"] for o in w.list_objects_v2(Bucket=dst, Prefix="simple/")["Contents"]]
assert all(re.match(r"^simple/\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-[0-9A-F]{16}$", k) for k in keys), keys
print("delivery: ok", flush=True)

w.put_bucket_logging(Bucket=src, BucketLoggingStatus={})
assert enabled(src) is None
print("all logging checks passed", flush=True)
