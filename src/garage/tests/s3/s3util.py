"""Helpers shared by the boto3 scripts of this directory (imported from
the script's own directory, which Python puts first on its path)."""
import os
import time

import boto3
from botocore.client import Config
from botocore.exceptions import ClientError


def client(endpoint, key_id, secret):
    """A boto3 S3 client of `endpoint`: path-style, region "garage", one
    attempt per call (a retry would hide the answer under test:
    botocore's `max_attempts` counts retries, `total_max_attempts` all
    attempts)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        region_name="garage",
        config=Config(retries={"total_max_attempts": 1}, s3={"addressing_style": "path"}),
    )


def expect_error(code, status, f, *a, **kw):
    """Calls `f`, which must fail with S3 error `code` and HTTP `status`;
    returns the error."""
    try:
        f(*a, **kw)
    except ClientError as e:
        got = (e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
        assert got == (code, status), f"expected {(code, status)}, got {got}: {e}"
        return e
    raise AssertionError(f"expected {code} {status}, the call succeeded")


def wait_for(what, check, seconds=30):
    """Polls `check` until it is true, failing after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def pause():
    """With GARAGE_TEST_PAUSE=DIR: writes DIR/ready, then waits for DIR/go
    (the test kills a node meanwhile)."""
    d = os.environ.get("GARAGE_TEST_PAUSE")
    if not d:
        return
    open(os.path.join(d, "ready"), "w").close()
    wait_for("the test to kill a node", lambda: os.path.exists(os.path.join(d, "go")), 120)
