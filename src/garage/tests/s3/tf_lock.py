"""Terraform's S3 backend locking pattern, raced: 8 boto3 clients spread
over the given endpoints each take a lock object with PutObject
If-None-Match: * (retrying while it is held), read it back, and release it
with DeleteObject If-Match: <its ETag>; then each tries once more to
release it with its old ETag, which must never delete a lock taken since.

Checked (a history check of the mutual exclusion): the periods during
which a client knew it held the lock (from the 200 of its PUT to the
sending of its DELETE) never overlap; each holder reads its own lock body;
every release by the holder succeeds (204); every stale release gets 412
or 404; every lock PUT refused with 412 ran while some lock may have
existed (no refusal of a free lock); every client takes the lock CYCLES
times. Printed: each client's answers, and the longest time the lock
stayed free.

usage: tf_lock.py KEY_ID SECRET ENDPOINT...
Prints "all lock cycles passed" at the end.
"""

import random
import sys
import threading
import time

import boto3
import botocore
from botocore.config import Config

CLIENTS = 8
CYCLES = 3
# Bounds: attempts to take the lock per cycle, and time for the whole run.
# Taking the lock is not fair: under load (2 shared cores in CI) one client
# lost 400 races in a row while the others took it 20 times. The count is
# therefore high; the time bound is what ends a run that makes no progress.
MAX_ATTEMPTS = 4000
DEADLINE_S = 240


def main():
    key_id, secret = sys.argv[1], sys.argv[2]
    endpoints = sys.argv[3:]
    cfg = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
        s3={"addressing_style": "path"},
    )

    def client(ep):
        return boto3.client("s3", endpoint_url=ep, aws_access_key_id=key_id,
                            aws_secret_access_key=secret, region_name="garage", config=cfg)

    client(endpoints[0]).create_bucket(Bucket="tfstate")
    lock_key = "env/prod/terraform.tfstate.tflock"
    start = time.monotonic()
    held = []  # (acquired_at, releasing_at, client, cycle)
    problems = []
    lock = threading.Lock()
    barrier = threading.Barrier(CLIENTS)

    events = []

    def ev(*a):
        with lock:
            events.append((time.monotonic() - start,) + a)

    def status(e):
        return e.response["ResponseMetadata"]["HTTPStatusCode"]

    def run(i):
        c = client(endpoints[i % len(endpoints)])
        rng = random.Random(i)
        barrier.wait()
        for cycle in range(CYCLES):
            body = f'{{"ID":"client-{i}-cycle-{cycle}","Operation":"OperationTypeApply"}}'.encode()
            etag = None
            for _ in range(MAX_ATTEMPTS):
                if time.monotonic() - start > DEADLINE_S:
                    with lock:
                        problems.append(f"client {i}: deadline passed in cycle {cycle}")
                    return
                try:
                    ev(i, "put>", cycle)
                    etag = c.put_object(Bucket="tfstate", Key=lock_key, Body=body,
                                        IfNoneMatch="*")["ETag"]
                    ev(i, "put<200", cycle, etag)
                    break
                except botocore.exceptions.ClientError as e:
                    ev(i, f"put<{status(e)}", cycle)
                    if status(e) not in (412, 409):
                        with lock:
                            problems.append(f"client {i}: lock PUT answered {status(e)}: {e}")
                        return
                    time.sleep(rng.uniform(0.01, 0.06))
            if etag is None:
                with lock:
                    problems.append(f"client {i}: never took the lock in cycle {cycle}")
                return
            acquired = time.monotonic()
            got = c.get_object(Bucket="tfstate", Key=lock_key)["Body"].read()
            if got != body:
                with lock:
                    problems.append(f"client {i}: holds the lock but reads {got!r}")
            releasing = time.monotonic()
            ev(i, "del>", cycle, etag)
            try:
                r = c.delete_object(Bucket="tfstate", Key=lock_key, IfMatch=etag)
                if r["ResponseMetadata"]["HTTPStatusCode"] != 204:
                    with lock:
                        problems.append(f"client {i}: release answered {r['ResponseMetadata']}")
            except botocore.exceptions.ClientError as e:
                try:
                    now = c.get_object(Bucket="tfstate", Key=lock_key)["Body"].read()
                except botocore.exceptions.ClientError as e2:
                    now = f"({status(e2)})"
                with lock:
                    problems.append(f"client {i}: its own release failed: {status(e)} {e}; "
                                    f"held {body!r} etag {etag}, the lock is now {now!r}")
            with lock:
                held.append((acquired, releasing, i, cycle))
            # A stale release: the lock may be someone else's by now.
            ev(i, "del<", cycle)
            try:
                ev(i, "stale>", cycle, etag)
                c.delete_object(Bucket="tfstate", Key=lock_key, IfMatch=etag)
                with lock:
                    problems.append(f"client {i}: a stale release succeeded")
            except botocore.exceptions.ClientError as e:
                ev(i, f"stale<{status(e)}", cycle)
                if status(e) not in (412, 404):
                    with lock:
                        problems.append(f"client {i}: stale release answered {status(e)}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=DEADLINE_S + 60)
        assert not t.is_alive(), "a client hung"
    # Per client: how its lock PUTs were answered, and its longest wait.
    for i in range(CLIENTS):
        answers = {}
        for e in events:
            if e[1] == i and e[2].startswith("put<"):
                answers[e[2][4:]] = answers.get(e[2][4:], 0) + 1
        print(f"client {i}: lock PUT answers {dict(sorted(answers.items()))}", flush=True)
    # The longest time the lock was free (released, not yet retaken).
    free_since, longest_free = None, 0.0
    for e in sorted(events):
        if e[2] == "del<" and free_since is None:
            free_since = e[0]
        elif e[2] == "put<200" and free_since is not None:
            longest_free = max(longest_free, e[0] - free_since)
            free_since = None
    print(f"longest time the lock was free: {longest_free:.3f} s", flush=True)
    check_refusals(events)
    if problems:
        for e in sorted(events):
            print("%8.4f" % e[0], *e[1:], file=sys.stderr)
    assert not problems, problems
    held.sort()
    assert len(held) == CLIENTS * CYCLES, f"{len(held)} lock periods, expected {CLIENTS * CYCLES}"
    for a, b in zip(held, held[1:]):
        assert b[0] > a[1], f"two clients held the lock at once: {a} and {b}"
    print(f"{len(held)} lock periods, none overlapping", flush=True)
    print("all lock cycles passed", flush=True)


def check_refusals(events):
    """A lock PUT answered 412 must have met a lock: some lock may have
    existed while it ran, i.e. its request overlapped a period from the
    sending of a winning PUT to the answer of that lock's release."""
    events = sorted(events)
    sent = {}  # client -> time of its pending lock PUT
    periods = []  # (winner's PUT sent, release answered)
    refused = []  # (sent, answered, client)
    won = {}  # client -> time its winning PUT was sent
    for e in events:
        t, i, kind = e[0], e[1], e[2]
        if kind == "put>":
            sent[i] = t
        elif kind == "put<200":
            won[i] = sent[i]
        elif kind == "put<412":
            refused.append((sent[i], t, i))
        elif kind == "del<":
            periods.append((won.pop(i), t))
    # A lock taken but not released (a failed run) lasts to the end.
    periods += [(w, float("inf")) for w in won.values()]
    bad = [r for r in refused
           if not any(p0 < r[1] and r[0] < p1 for p0, p1 in periods)]
    assert not bad, f"lock PUTs refused while no lock existed: {bad[:5]}"
    print(f"{len(refused)} refused lock PUTs, each met a lock", flush=True)


if __name__ == "__main__":
    main()
