"""Which signatures authenticate a request: requests signed by botocore's
own signers (SigV2 in a header, in a query string and in a POST form;
SigV4 for the right and a wrong region, in a header, a query string and a
POST form), sent with urllib3 (a dependency of botocore); us-east-1 for
the global operations; boto3 left on another region follows the region
the refusal names.

Usage: auth.py KEY_ID SECRET ENDPOINT REGION
"""

import base64
import hashlib
import hmac
import json
import sys
import xml.etree.ElementTree as ET

import boto3
import urllib3
from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

key_id, secret, endpoint, region = sys.argv[1:5]
creds = Credentials(key_id, secret)
http = urllib3.PoolManager()
BUCKET = "auth-bucket"


def client(reg):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        region_name=reg,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 1}),
    )


s3 = client(region)
s3.create_bucket(Bucket=BUCKET)
s3.put_object(Bucket=BUCKET, Key="k", Body=b"secret data")


def send(signer, path, method="GET"):
    req = AWSRequest(method=method, url=endpoint + path)
    signer.add_auth(req)
    p = req.prepare()
    return http.request(p.method, p.url, headers=dict(p.headers), body=p.body,
                        redirect=False)


def error(r):
    root = ET.fromstring(r.data)
    return root.findtext("Code"), root.findtext("Message") or ""


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what)


def refused(r, status, code, words, what):
    got = error(r) if r.data.startswith(b"<") else (None, r.data.decode(errors="replace"))
    check(r.status == status and got[0] == code and all(w in got[1] for w in words),
          f"{what}: {status} {code} (got {r.status} {got})")
    check(b"secret data" not in r.data, what + ": no object data in the answer")


# The control: SigV4 for the configured region works in every form.
check(send(S3SigV4Auth(creds, "s3", region), f"/{BUCKET}/k").data == b"secret data",
      "SigV4 header auth for the configured region")
check(send(S3SigV4QueryAuth(creds, "s3", region, expires=300), f"/{BUCKET}/k").data
      == b"secret data", "SigV4 presigned URL for the configured region")

# SigV2, correctly signed, in a header and in a query string.
for signer, what in [(HmacV1Auth(creds), "SigV2 header"),
                     (HmacV1QueryAuth(creds, expires=300), "SigV2 query string")]:
    for path in [f"/{BUCKET}/k", "/", f"/{BUCKET}"]:
        refused(send(signer, path), 400, "InvalidRequest", ["AWS4-HMAC-SHA256"],
                f"{what} on {path} refused")
# A SigV2 header with a wrong signature is refused the same way (the
# answer does not depend on the secret).
r = http.request("GET", f"{endpoint}/{BUCKET}/k",
                 headers={"Authorization": f"AWS {key_id}:bm90IGEgc2lnbmF0dXJl",
                          "Date": "Tue, 25 Nov 2026 00:00:00 GMT"})
refused(r, 400, "InvalidRequest", ["AWS4-HMAC-SHA256"], "SigV2 header, bad signature, refused")

# SigV4 signed for another region: refused, naming the region to use in
# the document (<Region>) and in x-amz-bucket-region.
def names_region(r, what):
    root = ET.fromstring(r.data)
    check(root.findtext("Region") == region and r.headers.get("x-amz-bucket-region") == region,
          f"{what}: the answer names region {region} ({r.headers.get('x-amz-bucket-region')}, "
          f"{r.data[:300]!r})")


for other in ["us-east-1", "eu-west-3"]:
    r = send(S3SigV4Auth(creds, "s3", other), f"/{BUCKET}/k")
    refused(r, 400, "AuthorizationHeaderMalformed", [f"'{other}'", f"'{region}'"],
            f"SigV4 header for region {other}")
    names_region(r, f"SigV4 header for region {other}")
    r = send(S3SigV4QueryAuth(creds, "s3", other, expires=300), f"/{BUCKET}/k")
    refused(r, 400, "AuthorizationQueryParametersError", [f"'{other}'", f"'{region}'"],
            f"SigV4 presigned URL for region {other}")
    names_region(r, f"SigV4 presigned URL for region {other}")
    # boto3 follows the region named and gets the object.
    got = client(other).get_object(Bucket=BUCKET, Key="k")["Body"].read()
    check(got == b"secret data", f"boto3 left on region {other} redirects and reads")

# us-east-1, AWS's global region, signs ListBuckets, GetBucketLocation and
# CreateBucket; another region does not, nor does us-east-1 sign the rest.
us = S3SigV4Auth(creds, "s3", "us-east-1")
r = send(us, "/")
check(r.status == 200 and BUCKET.encode() in r.data, f"ListBuckets signed for us-east-1: {r.status}")
r = send(us, f"/{BUCKET}?location")
check(r.status == 200 and ET.fromstring(r.data).text == region,
      f"GetBucketLocation signed for us-east-1 answers {region}: {r.status} {r.data!r}")
r = send(S3SigV4QueryAuth(creds, "s3", "us-east-1", expires=300), "/")
check(r.status == 200, f"a presigned ListBuckets for us-east-1: {r.status}")
r = send(us, "/auth-global-bucket", method="PUT")
check(r.status == 200, f"CreateBucket signed for us-east-1: {r.status} {r.data!r}")
for path, method in [("/", "GET"), (f"/{BUCKET}?location", "GET"), ("/auth-other-bucket", "PUT")]:
    refused(send(S3SigV4Auth(creds, "s3", "eu-west-3"), path, method=method), 400,
            "AuthorizationHeaderMalformed", ["'eu-west-3'"],
            f"{method} {path} signed for eu-west-3 refused")
for path, method in [(f"/{BUCKET}?versioning", "GET"), (f"/{BUCKET}?versioning", "PUT"),
                     (f"/{BUCKET}", "DELETE"), (f"/{BUCKET}", "HEAD")]:
    r = send(us, path, method=method)
    check(r.status == 400 and r.headers.get("x-amz-bucket-region") == region,
          f"{method} {path} signed for us-east-1 refused: {r.status}")

# boto3 and its defaults: us-east-1, no location constraint.
east = client("us-east-1")
east.create_bucket(Bucket="auth-east")
check("auth-east" in [b["Name"] for b in east.list_buckets()["Buckets"]],
      "boto3 on us-east-1 lists the bucket it made")
east.put_object(Bucket="auth-east", Key="e", Body=b"east")
check(east.get_object(Bucket="auth-east", Key="e")["Body"].read() == b"east",
      "boto3 on us-east-1 puts and gets")
check(s3.get_bucket_location(Bucket="auth-east")["LocationConstraint"] == region,
      f"the bucket made through us-east-1 is in {region}")

# POST forms: SigV2 (signature = HMAC-SHA1 of the policy), and SigV4 for
# another region (boto3's generate_presigned_post).
policy = base64.b64encode(json.dumps({
    "expiration": "2099-01-01T00:00:00Z",
    "conditions": [{"bucket": BUCKET}, ["starts-with", "$key", ""]],
}).encode()).decode()
sig = base64.b64encode(hmac.new(secret.encode(), policy.encode(), hashlib.sha1).digest()).decode()
r = http.request("POST", f"{endpoint}/{BUCKET}", fields={
    "key": "posted-v2", "AWSAccessKeyId": key_id, "policy": policy, "signature": sig,
    "file": ("f", b"v2 form"),
}, redirect=False)
refused(r, 400, "InvalidRequest", ["AWS4-HMAC-SHA256"], "SigV2 POST form refused")

p = client("us-east-1").generate_presigned_post(BUCKET, "posted-v4", ExpiresIn=300)
fields = dict(p["fields"])
fields["file"] = ("f", b"v4 form, other region")
r = http.request("POST", f"{endpoint}/{BUCKET}", fields=fields, redirect=False)
refused(r, 400, "AuthorizationHeaderMalformed", ["'us-east-1'", f"'{region}'"],
        "SigV4 POST form for another region refused")

for k in ["posted-v2", "posted-v4"]:
    try:
        s3.head_object(Bucket=BUCKET, Key=k)
        check(False, f"{k} was not stored")
    except s3.exceptions.ClientError:
        check(True, f"{k} was not stored")

p = s3.generate_presigned_post(BUCKET, "posted-ok", ExpiresIn=300)
fields = dict(p["fields"])
fields["file"] = ("f", b"good form")
r = http.request("POST", f"{endpoint}/{BUCKET}", fields=fields, redirect=False)
check(r.status in (200, 204), f"SigV4 POST form for the configured region: {r.status}")
check(s3.get_object(Bucket=BUCKET, Key="posted-ok")["Body"].read() == b"good form",
      "the good form was stored")
print("all checks passed")
