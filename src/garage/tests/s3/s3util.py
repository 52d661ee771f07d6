"""Helpers shared by the boto3 scripts of this directory (imported from
the script's own directory, which Python puts first on its path)."""
import boto3
from botocore.client import Config
from botocore.exceptions import ClientError


def client(endpoint, key_id, secret):
    """A boto3 S3 client of `endpoint`: path-style, region "garage", no
    retries (a retry would hide the answer under test)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        region_name="garage",
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
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
