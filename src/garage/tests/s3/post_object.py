"""PostObject (browser form upload) with forms made by boto3's
generate_presigned_post and sent as multipart/form-data by urllib3 (a
dependency of botocore, so always there with boto3).

Usage: post_object.py KEY_ID SECRET ENDPOINT
"""

import hashlib
import os
import sys
import xml.etree.ElementTree as ET
from urllib.parse import parse_qs, urlparse

import boto3
import urllib3
from botocore.config import Config

key_id, secret, endpoint = sys.argv[1:4]
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    aws_access_key_id=key_id,
    aws_secret_access_key=secret,
    region_name="garage",
    config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
)
http = urllib3.PoolManager()
BUCKET = "post-bucket"
s3.create_bucket(Bucket=BUCKET, ObjectOwnership="ObjectWriter")


def form(key, fields=None, conditions=None, expires=300):
    return s3.generate_presigned_post(
        BUCKET, key, Fields=fields, Conditions=conditions, ExpiresIn=expires
    )


def post(p, data, filename="f.bin", extra=None):
    fields = dict(p["fields"])
    fields.update(extra or {})
    fields["file"] = (filename, data)  # the file comes last, as S3 requires
    return http.request("POST", p["url"], fields=fields, redirect=False)


def code(r):
    return ET.fromstring(r.data).findtext("Code")


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what)


def stored(key):
    return s3.get_object(Bucket=BUCKET, Key=key)


def absent(key):
    try:
        s3.head_object(Bucket=BUCKET, Key=key)
        return False
    except s3.exceptions.ClientError as e:
        return e.response["Error"]["Code"] in ("404", "NoSuchKey")


# 201 with the PostResponse document; the conditions hold (key prefix,
# size range, content type); Content-Type and x-amz-meta-* are kept.
data = b"hello from a form"
p = form(
    "uploads/a.txt",
    fields={
        "success_action_status": "201",
        "Content-Type": "text/plain",
        "x-amz-meta-origin": "form",
    },
    conditions=[
        ["starts-with", "$key", "uploads/"],
        ["content-length-range", 1, 4 << 20],
        {"success_action_status": "201"},
        ["starts-with", "$Content-Type", "text/"],
        {"x-amz-meta-origin": "form"},
    ],
)
r = post(p, data)
check(r.status == 201, "201 with success_action_status=201 (%d %r)" % (r.status, r.data))
doc = ET.fromstring(r.data)
check(doc.findtext("Key") == "uploads/a.txt", "PostResponse names the key")
check(doc.findtext("Bucket") == BUCKET, "PostResponse names the bucket")
o = stored("uploads/a.txt")
check(o["Body"].read() == data, "the form's file is the object")
check(o["ContentType"] == "text/plain", "Content-Type from the form")
check(o["Metadata"].get("origin") == "form", "x-amz-meta-* from the form")
# (s3s writes the ETag of PostResponse without its quotes.)
check(o["ETag"].strip('"') == doc.findtext("ETag").strip('"'), "PostResponse ETag is the object's")

# Several blocks (3 MiB + 1), default answer 204.
big = os.urandom((3 << 20) + 1)
p = form("big.bin", conditions=[["content-length-range", 0, 4 << 20]])
r = post(p, big)
check(r.status == 204, "204 by default (%d %r)" % (r.status, r.data))
got = stored("big.bin")["Body"].read()
check(hashlib.sha256(got).digest() == hashlib.sha256(big).digest(), "3 MiB + 1 form upload intact")

# 200 when asked for, and an empty file.
p = form("empty", fields={"success_action_status": "200"},
         conditions=[{"success_action_status": "200"}])
r = post(p, b"")
check(r.status == 200, "200 with success_action_status=200 (%d %r)" % (r.status, r.data))
check(stored("empty")["ContentLength"] == 0, "empty form upload")

# success_action_redirect: 303 to it, with bucket, key and etag added.
p = form("redir.txt", fields={"success_action_redirect": "https://app.example/done?x=1"},
         conditions=[{"success_action_redirect": "https://app.example/done?x=1"}])
r = post(p, b"r")
check(r.status == 303, "303 with success_action_redirect (%d %r)" % (r.status, r.data))
loc = urlparse(r.headers["Location"])
q = parse_qs(loc.query)
check(loc.netloc == "app.example" and q["x"] == ["1"], "redirected where asked")
check(q["bucket"] == [BUCKET] and q["key"] == ["redir.txt"] and q["etag"], "redirect carries bucket, key, etag")

# ${filename} in the key: the name of the form's file.
p = form("named/${filename}", conditions=[["starts-with", "$key", "named/"]])
r = post(p, b"named", filename="report 2026.txt")
check(r.status == 204, "a ${filename} key accepted (%d %r)" % (r.status, r.data))
check(stored("named/report 2026.txt")["Body"].read() == b"named", "${filename} is the file's name")
check(absent("named/${filename}"), "the key is not stored literally")

# The tagging field: an XML tag set.
tagging = "<Tagging><TagSet><Tag><Key>source</Key><Value>form</Value></Tag></TagSet></Tagging>"
p = form("tagged.txt", fields={"tagging": tagging}, conditions=[{"tagging": tagging}])
r = post(p, b"tagged")
check(r.status == 204, "a form with a tagging field accepted (%d %r)" % (r.status, r.data))
ts = s3.get_object_tagging(Bucket=BUCKET, Key="tagged.txt")["TagSet"]
check(ts == [{"Key": "source", "Value": "form"}], "the tagging field's tags are the object's (%r)" % ts)
p = form("badtags.txt", fields={"tagging": "source=form"}, conditions=[{"tagging": "source=form"}])
r = post(p, b"x")
check(r.status == 400 and code(r) == "MalformedXML", "a tagging field that is not XML: MalformedXML")
check(absent("badtags.txt"), "nothing stored with bad tags")

# Refusals: nothing is stored.
p = form("small.txt", conditions=[["content-length-range", 1, 10]])
r = post(p, b"x" * 11)
check(r.status == 400 and code(r) == "EntityTooLarge", "over content-length-range: EntityTooLarge")
check(absent("small.txt"), "nothing stored over the range")
r = post(p, b"")
check(r.status == 400 and code(r) == "EntityTooSmall", "under content-length-range: EntityTooSmall")

# garage caps a form's file at 64 MiB (s3s holds it in memory).
p = form("huge.bin")
r = post(p, b"\0" * ((64 << 20) + 1))
check(r.status == 400 and code(r) == "EntityTooLarge", "over 64 MiB: EntityTooLarge")
check(absent("huge.bin"), "nothing stored over 64 MiB")

p = form("uploads/${filename}", conditions=[["starts-with", "$key", "uploads/"]])
r = post(p, b"x", extra={"key": "elsewhere/x"})
check(r.status in (400, 403) and code(r) in ("InvalidPolicyDocument", "AccessDenied"),
      "key outside starts-with refused (%d %r)" % (r.status, r.data))
check(absent("elsewhere/x"), "nothing stored outside the prefix")

p = form("extra.txt")
r = post(p, b"x", extra={"x-amz-meta-sneaky": "1"})
check(r.status == 403 and code(r) == "AccessDenied", "a field not in the policy refused")

p = form("tampered.txt")
fields = dict(p["fields"])
fields["x-amz-signature"] = "0" * 64
r = post({"url": p["url"], "fields": fields}, b"x")
check(r.status == 403 and code(r) == "SignatureDoesNotMatch", "bad policy signature refused")
check(absent("tampered.txt"), "nothing stored with a bad signature")

p = form("late.txt", expires=-60)
r = post(p, b"x")
check(r.status == 403 and code(r) == "AccessDenied", "expired policy refused")

p = form("other.txt", conditions=[{"bucket": "some-other-bucket"}])
r = post(p, b"x")
check(r.status in (400, 403), "bucket condition checked (%d %r)" % (r.status, r.data))
check(absent("other.txt"), "nothing stored for another bucket's policy")

# A large form whose file is all CR bytes: every piece of the body the
# server reads ends with what may start the next boundary ("\r\n--"),
# which made the form parser buffer the whole next read and refuse the
# upload (400 "failed to read file stream") when reads exceeded 64 KiB.
# Sent in one write, then in tiny writes (a chunked body of 1000-byte
# pieces).
crs = b"\r" * (3 << 20)
p = form("big-cr.bin")
r = post(p, crs)
check(r.status == 204, "a 3 MiB form in one write (%d %r)" % (r.status, r.data[:200]))
check(stored("big-cr.bin")["Body"].read() == crs, "its file is the object")
p = form("tiny-writes.bin")
boundary = "garage-test-boundary"
parts = []
for k, v in p["fields"].items():
    parts.append(
        ('--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (boundary, k, v)).encode()
    )
parts.append(
    ('--%s\r\nContent-Disposition: form-data; name="file"; filename="t.bin"\r\n'
     "Content-Type: application/octet-stream\r\n\r\n" % boundary).encode()
)
body = b"".join(parts) + crs[: 300 << 10] + ("\r\n--%s--\r\n" % boundary).encode()
r = http.request(
    "POST",
    p["url"],
    body=(body[i : i + 1000] for i in range(0, len(body), 1000)),
    headers={"Content-Type": "multipart/form-data; boundary=%s" % boundary},
    chunked=True,
    redirect=False,
)
check(r.status == 204, "a form in 1000-byte writes (%d %r)" % (r.status, r.data[:200]))
check(stored("tiny-writes.bin")["Body"].read() == crs[: 300 << 10], "its file is the object")

# SSE-C form fields: the object is sealed with the form's key.
import base64
ck = os.urandom(32)
ssec = {
    "x-amz-server-side-encryption-customer-algorithm": "AES256",
    "x-amz-server-side-encryption-customer-key": base64.b64encode(ck).decode(),
    "x-amz-server-side-encryption-customer-key-MD5": base64.b64encode(hashlib.md5(ck).digest()).decode(),
}
p = form("ssec.bin", fields=dict(ssec), conditions=[{k: v} for k, v in ssec.items()])
r = post(p, b"sealed by a form")
check(r.status == 204, "SSE-C form upload (%d %r)" % (r.status, r.data))
try:
    s3.get_object(Bucket=BUCKET, Key="ssec.bin")
    check(False, "an SSE-C form object needs its key")
except s3.exceptions.ClientError as e:
    check(e.response["Error"]["Code"] == "InvalidRequest", "an SSE-C form object needs its key")
got = s3.get_object(Bucket=BUCKET, Key="ssec.bin", SSECustomerAlgorithm="AES256",
                    SSECustomerKey=ck)["Body"].read()
check(got == b"sealed by a form", "the SSE-C form object reads back with its key")

# Anonymous forms (no policy, no signature): only where the bucket's ACL
# lets anyone write.
anon = {"key": "anon/a.txt"}
r = http.request("POST", f"{endpoint}/{BUCKET}", fields={**anon, "file": ("f", b"anon")})
check(r.status == 403 and code(r) == "AccessDenied", "an anonymous form to a private bucket (%d)" % r.status)
s3.put_bucket_acl(Bucket=BUCKET, ACL="public-read-write")
r = http.request("POST", f"{endpoint}/{BUCKET}", fields={**anon, "file": ("f", b"anon")})
check(r.status == 204, "an anonymous form to a public-write bucket (%d %r)" % (r.status, r.data))
check(stored("anon/a.txt")["Body"].read() == b"anon", "the anonymous form's object")
s3.put_bucket_acl(Bucket=BUCKET, ACL="private")

print("all checks passed")
