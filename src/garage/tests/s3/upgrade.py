"""The data and the traffic of the mixed-version test
(src/garage/tests/e2e/upgrade.rs).

    upgrade.py KEY SECRET MODE DIR ENDPOINT...

MODE:
  write    writes data of every kind through the first endpoint (inline,
           multi-block, multipart, versioned with a delete marker, locked,
           tagged, SSE-C, SSE-S3, SSE-KMS with $KMS_KEY_ID, erasure-coded,
           a website configuration) and records it in DIR/manifest.json
  check    reads back everything DIR/manifest.json records, through every
           endpoint
  traffic  a live writer and reader until DIR/stop exists (at most 900 s):
           each round PUTs a new object and GETs an acknowledged one, on
           one endpoint; a request refused at connect (the node is stopped)
           moves to the next endpoint and is counted apart; any other error
           is a failure. Records DIR/traffic.json.
  verify   every write traffic acknowledged reads back, with its bytes,
           through every endpoint; no failure was recorded.
  multipart  one multipart upload spread over the endpoints: created and
           its first part written through the first, its second part
           through the second, listed and completed through the last; read
           back through every endpoint and recorded in the manifest (so
           `check` reads it again). Object key $MPU_KEY; with
           $MPU_FINISH_OPEN set, the upload is instead the one `write` left
           open (parts written before, by `write`'s release, stay in its
           entry; those written now go where that upload keeps them), and
           `check` then expects no upload in progress.
"""
import hashlib
import json
import os
import random
import sys
import time

import botocore.exceptions
from botocore.exceptions import ClientError

from s3util import client

KEY, SECRET, MODE, DIR = sys.argv[1:5]
ENDPOINTS = sys.argv[5:]
BUCKET = "upgrade-data"
LOCKED = "upgrade-locked"
VERSIONED = "upgrade-versioned"
SITE = "upgrade-site"
TRAFFIC = "upgrade-traffic"
SSEC_KEY = bytes(range(32))


def md5(b):
    return hashlib.md5(b).hexdigest()


def blob(n, seed):
    r = random.Random(seed)
    return r.randbytes(n)


def ssec():
    import base64

    return {
        "SSECustomerAlgorithm": "AES256",
        "SSECustomerKey": base64.b64encode(SSEC_KEY).decode(),
        "SSECustomerKeyMD5": base64.b64encode(hashlib.md5(SSEC_KEY).digest()).decode(),
    }


def write():
    s3 = client(ENDPOINTS[0], KEY, SECRET)
    items = []

    def put(bucket, key, body, check=None, **kw):
        r = s3.put_object(Bucket=bucket, Key=key, Body=body, **kw)
        items.append(
            {
                "bucket": bucket,
                "key": key,
                "md5": md5(body),
                "version": r.get("VersionId"),
                "check": check or {},
            }
        )
        return r

    s3.create_bucket(Bucket=BUCKET)
    put(BUCKET, "inline", b"small object, stored inline")
    put(BUCKET, "multi-block", blob(3 * 1024 * 1024 + 17, 1))
    put(BUCKET, "tagged", b"with tags", {"tags": {"team": "a", "n": "1"}}, Tagging="team=a&n=1")
    put(BUCKET, "ssec", blob(1500 * 1024, 2), {"ssec": True}, **ssec())
    put(BUCKET, "sse-s3", blob(200 * 1024, 3), {"sse": "AES256"}, ServerSideEncryption="AES256")
    kms = os.environ["KMS_KEY_ID"]
    put(
        BUCKET,
        "sse-kms",
        blob(300 * 1024, 4),
        {"sse": "aws:kms"},
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId=kms,
    )
    put(BUCKET, "erasure", blob(2 * 1024 * 1024 + 5, 5), {"class": "STANDARD_IA"}, StorageClass="STANDARD_IA")

    # Multipart: three parts, the last one short.
    parts_data = [blob(5 * 1024 * 1024, 10 + i) for i in range(2)] + [b"tail" * 1000]
    mpu = s3.create_multipart_upload(Bucket=BUCKET, Key="multipart")
    parts = []
    for i, d in enumerate(parts_data, start=1):
        r = s3.upload_part(Bucket=BUCKET, Key="multipart", UploadId=mpu["UploadId"], PartNumber=i, Body=d)
        parts.append({"PartNumber": i, "ETag": r["ETag"]})
    s3.complete_multipart_upload(
        Bucket=BUCKET, Key="multipart", UploadId=mpu["UploadId"], MultipartUpload={"Parts": parts}
    )
    items.append({"bucket": BUCKET, "key": "multipart", "md5": md5(b"".join(parts_data)), "version": None, "check": {}})
    # An upload left unfinished: it must still be listed after the upgrade.
    open_upload = s3.create_multipart_upload(Bucket=BUCKET, Key="unfinished")["UploadId"]

    # Versioning: two versions and a delete marker.
    s3.create_bucket(Bucket=VERSIONED)
    s3.put_bucket_versioning(Bucket=VERSIONED, VersioningConfiguration={"Status": "Enabled"})
    put(VERSIONED, "doc", b"version one")
    put(VERSIONED, "doc", b"version two")
    marker = s3.delete_object(Bucket=VERSIONED, Key="doc")["VersionId"]

    # Object lock: a COMPLIANCE retention and a legal hold.
    s3.create_bucket(Bucket=LOCKED, ObjectLockEnabledForBucket=True)
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400 * 30))
    put(
        LOCKED,
        "kept",
        b"locked for a month",
        {"lock": "COMPLIANCE"},
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=until,
        ObjectLockLegalHoldStatus="ON",
    )

    # A website.
    s3.create_bucket(Bucket=SITE)
    s3.put_bucket_website(
        Bucket=SITE,
        WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}, "ErrorDocument": {"Key": "404.html"}},
    )
    put(SITE, "index.html", b"<h1>hello</h1>", ContentType="text/html")
    s3.create_bucket(Bucket=TRAFFIC)

    manifest = {"items": items, "marker": marker, "open_upload": open_upload}
    with open(os.path.join(DIR, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    print(f"written {len(items)} objects")


def get_body(s3, it, **kw):
    args = {"Bucket": it["bucket"], "Key": it["key"]}
    if it.get("version"):
        args["VersionId"] = it["version"]
    if it["check"].get("ssec"):
        args.update(ssec())
    return s3.get_object(**args, **kw)


def check():
    with open(os.path.join(DIR, "manifest.json")) as f:
        m = json.load(f)
    n = 0
    for ep in ENDPOINTS:
        s3 = client(ep, KEY, SECRET)
        for it in m["items"]:
            r = get_body(s3, it)
            body = r["Body"].read()
            where = f"{it['bucket']}/{it['key']} ({it.get('version')}) through {ep}"
            assert md5(body) == it["md5"], f"{where}: wrong bytes"
            c = it["check"]
            if "sse" in c:
                assert r.get("ServerSideEncryption") == c["sse"], f"{where}: {r.get('ServerSideEncryption')}"
            if "class" in c:
                assert r.get("StorageClass") == c["class"], f"{where}: class {r.get('StorageClass')}"
            if "lock" in c:
                assert r.get("ObjectLockMode") == c["lock"], f"{where}: lock {r.get('ObjectLockMode')}"
                assert r.get("ObjectLockLegalHoldStatus") == "ON", where
            if "tags" in c:
                t = s3.get_object_tagging(Bucket=it["bucket"], Key=it["key"])["TagSet"]
                assert {x["Key"]: x["Value"] for x in t} == c["tags"], f"{where}: tags {t}"
            n += 1
        # The delete marker hides the key; both versions stay listed.
        try:
            s3.get_object(Bucket=VERSIONED, Key="doc")
            raise AssertionError(f"{VERSIONED}/doc is readable through {ep} despite its delete marker")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "NoSuchKey", e
        vs = s3.list_object_versions(Bucket=VERSIONED)
        assert len(vs.get("Versions", [])) == 2 and len(vs.get("DeleteMarkers", [])) == 1, vs
        ups = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        want = [m["open_upload"]] if m["open_upload"] else []
        assert [u["UploadId"] for u in ups] == want, ups
        w = s3.get_bucket_website(Bucket=SITE)
        assert w["IndexDocument"]["Suffix"] == "index.html", w
        # A locked object cannot be deleted.
        locked = next(i for i in m["items"] if i["bucket"] == LOCKED)
        try:
            s3.delete_object(Bucket=LOCKED, Key="kept", VersionId=locked["version"])
            raise AssertionError("a COMPLIANCE-locked version was deleted")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "AccessDenied", e
    print(f"checked {n} reads through {len(ENDPOINTS)} endpoints")


def multipart():
    path = os.path.join(DIR, "manifest.json")
    with open(path) as f:
        m = json.load(f)
    first, second, last = (client(ep, KEY, SECRET) for ep in (ENDPOINTS[0], ENDPOINTS[1], ENDPOINTS[-1]))
    if os.environ.get("MPU_FINISH_OPEN"):
        key, up = "unfinished", m["open_upload"]
    else:
        key = os.environ["MPU_KEY"]
        up = first.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    data = [blob(5 * 1024 * 1024, len(key)), blob(70_000, len(key) + 1)]
    parts = []
    for n, (s3, d) in enumerate(zip((first, second), data), start=1):
        r = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=n, Body=d)
        parts.append({"PartNumber": n, "ETag": r["ETag"]})
    listed = last.list_parts(Bucket=BUCKET, Key=key, UploadId=up)
    got = [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed.get("Parts", [])]
    want = [(p["PartNumber"], p["ETag"], len(d)) for p, d in zip(parts, data)]
    assert got == want, f"ListParts of {key} through {ENDPOINTS[-1]}: {got}, expected {want}"
    last.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up, MultipartUpload={"Parts": parts})
    for ep in ENDPOINTS:
        body = client(ep, KEY, SECRET).get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert md5(body) == md5(b"".join(data)), f"{key} through {ep}: wrong bytes"
    m["items"].append({"bucket": BUCKET, "key": key, "md5": md5(b"".join(data)), "version": None, "check": {}})
    if os.environ.get("MPU_FINISH_OPEN"):
        m["open_upload"] = None
    with open(path, "w") as f:
        json.dump(m, f)
    print(f"multipart {key}: 2 parts through 2 nodes, completed through a third")


def refused(e):
    """A request sent to a stopped node: the connection was refused, or a
    kept-alive connection was closed by the node as it stopped (a running
    node never closes one under a request)."""
    return isinstance(
        e, (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionClosedError)
    )


def traffic():
    clients = [client(ep, KEY, SECRET) for ep in ENDPOINTS]
    at = 0
    acked = []
    failures = []
    to_stopped = 0
    ops = 0
    rnd = random.Random(7)
    deadline = time.monotonic() + 900
    stop = os.path.join(DIR, "stop")
    i = 0
    while not os.path.exists(stop) and time.monotonic() < deadline:
        i += 1
        body = blob(rnd.choice([100, 2000, 70_000, 1_200_000]), 1000 + i)
        key = f"w/{i:06}"
        for op in ("put", "get"):
            done = False
            for _ in range(len(clients)):
                s3 = clients[at]
                ops += 1
                try:
                    if op == "put":
                        s3.put_object(Bucket=TRAFFIC, Key=key, Body=body)
                        acked.append((key, md5(body)))
                    elif acked:
                        k, h = rnd.choice(acked)
                        got = s3.get_object(Bucket=TRAFFIC, Key=k)["Body"].read()
                        if md5(got) != h:
                            failures.append(f"GET {k} through {ENDPOINTS[at]}: wrong bytes")
                    done = True
                    break
                except Exception as e:  # noqa: BLE001 (every error is classified)
                    if refused(e):
                        to_stopped += 1
                        at = (at + 1) % len(clients)
                        continue
                    failures.append(f"{op.upper()} {key} through {ENDPOINTS[at]}: {type(e).__name__}: {e}")
                    done = True
                    break
            if not done:
                failures.append(f"{op.upper()} {key}: every endpoint refused the connection")
        # Spread the load over the nodes, as a load balancer would.
        if i % 5 == 0:
            at = (at + 1) % len(clients)
    with open(os.path.join(DIR, "traffic.json"), "w") as f:
        json.dump({"acked": acked, "failures": failures, "to_stopped": to_stopped, "ops": ops}, f)
    print(f"traffic: {ops} requests, {len(acked)} writes acknowledged, {to_stopped} sent to a stopped node, {len(failures)} failed")
    print("traffic done")


def verify():
    with open(os.path.join(DIR, "traffic.json")) as f:
        t = json.load(f)
    assert not t["failures"], f"{len(t['failures'])} requests failed: {t['failures'][:5]}"
    assert t["acked"], "no write was acknowledged"
    for ep in ENDPOINTS:
        s3 = client(ep, KEY, SECRET)
        for k, h in t["acked"]:
            got = s3.get_object(Bucket=TRAFFIC, Key=k)["Body"].read()
            assert md5(got) == h, f"{k} through {ep}: wrong bytes"
    print(f"verified {len(t['acked'])} acknowledged writes through {len(ENDPOINTS)} endpoints")


{"write": write, "check": check, "traffic": traffic, "verify": verify, "multipart": multipart}[MODE]()
