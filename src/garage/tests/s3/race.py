#!/usr/bin/env python3
"""Conditional-write races: 32 boto3 clients spread over the given S3
endpoints race PutObject with If-None-Match: * on a new key (exactly one may
succeed, the others must get 412), then with If-Match: <its ETag> (again
exactly one). Rounds alternate small (inline) and 200 KiB (block) bodies.
Every PUT of a round has a body of its own, different in the two races:
If-Match compares ETags, so a writer that re-sent the body the key already
holds would leave its ETag unchanged and let a second If-Match writer
succeed too (as S3 does; checked at the end, on key "same-etag").

usage: race.py KEY_ID SECRET ROUNDS FRAGILE_ENDPOINT ENDPOINT...

FRAGILE_ENDPOINT is the index of an endpoint whose node the caller may kill
at any time (-1: none): its clients may see connection errors or 5xx; the
clients of the other endpoints must only ever see 200 or 412. Prints
"round N started" as each round's first race starts (the caller waits for it
to kill a node mid-race), "round N ok" after it, and "all races passed".
"""

import hashlib
import sys
import threading

import boto3
import botocore
from botocore.config import Config

CLIENTS = 32


def main():
    key_id, secret, rounds, fragile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    endpoints = sys.argv[5:]
    cfg = Config(
        retries={"max_attempts": 1, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
        max_pool_connections=4,
        s3={"addressing_style": "path"},
    )

    def client(ep):
        return boto3.client(
            "s3",
            endpoint_url=ep,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            region_name="garage",
            config=cfg,
        )

    admin = client(endpoints[0])
    admin.create_bucket(Bucket="race")
    clients = [(i % len(endpoints), client(endpoints[i % len(endpoints)])) for i in range(CLIENTS)]

    def race(key, size, extra, announce=None):
        """Every client PUTs its own body at once; returns [(ep, outcome, sha)]."""
        barrier = threading.Barrier(CLIENTS)
        results = [None] * CLIENTS
        # The condition is part of the body, early enough to survive the
        # cut to 20 bytes: a client's If-Match body must differ from its
        # If-None-Match one (see the module comment).
        cond = "m" if "IfMatch" in extra else "n"

        def run(i):
            ep, c = clients[i]
            body = (f"{i} {cond} {key} ".encode() * (size // 10 + 1))[:size]
            sha = hashlib.sha256(body).hexdigest()
            barrier.wait()
            if i == 0 and announce:
                print(announce, flush=True)
            try:
                c.put_object(Bucket="race", Key=key, Body=body, **extra)
                results[i] = (ep, 200, sha)
            except botocore.exceptions.ClientError as e:
                results[i] = (ep, e.response["ResponseMetadata"]["HTTPStatusCode"], sha)
            except Exception as e:  # connection refused or reset
                results[i] = (ep, type(e).__name__, sha)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
            assert not t.is_alive(), f"{key}: a client hung"
        return results

    def check(key, results, what):
        bad = [r for r in results if r[1] not in (200, 412) and r[0] != fragile]
        assert not bad, f"{key} ({what}): unexpected answers {bad}"
        winners = [r for r in results if r[1] == 200]
        unsure = [r for r in results if r[1] not in (200, 412)]
        assert len(winners) <= 1, f"{key} ({what}): {len(winners)} writers succeeded: {results}"
        # Read through an endpoint that stays up.
        reader = next(c for ep, c in clients if ep != fragile)
        got = reader.get_object(Bucket="race", Key=key)
        sha = hashlib.sha256(got["Body"].read()).hexdigest()
        if winners:
            assert sha == winners[0][2], f"{key} ({what}): the object is not the winner's body"
        else:
            # The winner's answer was lost with its node: the object is the
            # body of a client whose request did not get an answer.
            assert unsure, f"{key} ({what}): nobody succeeded: {results}"
            assert sha in [r[2] for r in unsure], f"{key} ({what}): the object is nobody's body"
        return got["ETag"], len(winners)

    for r in range(rounds):
        key = f"lock-{r}"
        size = 20 if r % 2 == 0 else 200 * 1024
        res = race(key, size, {"IfNoneMatch": "*"}, announce=f"round {r} started")
        etag, n1 = check(key, res, "If-None-Match: *")
        res2 = race(key, size, {"IfMatch": etag})
        bodies = {x[2] for x in res} | {x[2] for x in res2}
        assert len(bodies) == 2 * CLIENTS, f"{key}: two PUTs of this round had the same body"
        res = res2
        _, n2 = check(key, res, f"If-Match: {etag}")
        print(f"round {r} ok ({size} B; winners {n1} and {n2})", flush=True)

    # If-Match compares ETags, not versions: replacing an object by the
    # same bytes keeps its ETag, so If-Match on that ETag still holds after
    # (what made the races above see two winners when a client re-sent its
    # body). Sequential, through an endpoint that stays up.
    c = next(c for ep, c in clients if ep != fragile)
    first = c.put_object(Bucket="race", Key="same-etag", Body=b"same", IfNoneMatch="*")["ETag"]
    again = c.put_object(Bucket="race", Key="same-etag", Body=b"same", IfMatch=first)["ETag"]
    assert again == first, f"same bytes, new ETag: {first} then {again}"
    c.put_object(Bucket="race", Key="same-etag", Body=b"other", IfMatch=first)
    try:
        c.put_object(Bucket="race", Key="same-etag", Body=b"third", IfMatch=first)
        raise AssertionError("If-Match on a replaced ETag succeeded")
    except botocore.exceptions.ClientError as e:
        code = e.response["ResponseMetadata"]["HTTPStatusCode"]
        assert code == 412, f"If-Match on a replaced ETag: {code}"
    print("same-etag ok", flush=True)
    print("all races passed", flush=True)


if __name__ == "__main__":
    main()
