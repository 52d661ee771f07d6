"""Request limits: DeleteObjects names at most 1000 keys, buffered XML
bodies and PostObject form fields are bounded, and so are request headers;
each refused with AWS's error, and nothing deleted or stored on refusal.

Usage: limits.py KEY_ID SECRET ENDPOINT
"""

import sys
import xml.etree.ElementTree as ET

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
    config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                  retries={"max_attempts": 1}),
)
http = urllib3.PoolManager()
BUCKET = "limits-bucket"
s3.create_bucket(Bucket=BUCKET)


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what)


def fails(f, status, code, what):
    try:
        f()
    except s3.exceptions.ClientError as e:
        got = (e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"])
        check(got == (status, code), f"{what}: {status} {code} (got {got})")
        return
    check(False, f"{what}: {status} {code} (it succeeded)")


# DeleteObjects: 1000 keys are fine, 1001 are MalformedXML and delete nothing.
s3.put_object(Bucket=BUCKET, Key="keep", Body=b"x")
keys = [{"Key": f"k{i}"} for i in range(1000)]
r = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})
check(not r.get("Errors"), "DeleteObjects of 1000 keys")
fails(lambda: s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys + [{"Key": "keep"}]}),
      400, "MalformedXML", "DeleteObjects of 1001 keys")
check(s3.get_object(Bucket=BUCKET, Key="keep")["Body"].read() == b"x",
      "the refused DeleteObjects deleted nothing")

# A buffered XML body over 8 MiB (a CORS configuration of 9 MB).
origins = [f"https://site-{i:08d}.example.com" for i in range(300_000)]
fails(lambda: s3.put_bucket_cors(Bucket=BUCKET, CORSConfiguration={"CORSRules": [
    {"AllowedMethods": ["GET"], "AllowedOrigins": origins}]}),
    400, "MaxMessageLengthExceeded", "a 9 MB XML body")
fails(lambda: s3.get_bucket_cors(Bucket=BUCKET), 404, "NoSuchCORSConfiguration",
      "the refused CORS configuration was not stored")

# A PostObject form field over 64 KiB, in a correctly signed form.
p = s3.generate_presigned_post(BUCKET, "posted", ExpiresIn=300)
fields = dict(p["fields"])
fields["x-amz-meta-big"] = "b" * (100 << 10)
fields["file"] = ("f", b"data")
r = http.request("POST", f"{endpoint}/{BUCKET}", fields=fields, redirect=False)
code = ET.fromstring(r.data).findtext("Code") if r.data.startswith(b"<") else r.data[:200]
check((r.status, code) == (400, "MalformedPOSTRequest"),
      f"a 100 KiB form field: 400 MalformedPOSTRequest (got {r.status} {code})")
fails(lambda: s3.head_object(Bucket=BUCKET, Key="posted"), 404, "404",
      "the refused form stored nothing")

# More than 100 request headers: 431 from the HTTP layer.
headers = {f"x-filler-{i}": "v" for i in range(150)}
r = http.request("GET", f"{endpoint}/", headers=headers)
check(r.status == 431, f"150 request headers: 431 (got {r.status})")
print("all checks passed")
