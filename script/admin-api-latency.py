#!/usr/bin/env python3
"""Latency of admin API calls over one keep-alive connection.

Usage: GARAGE_ADMIN_TOKEN=... script/admin-api-latency.py [host:port] [n]
(default 127.0.0.1:3903, 300 requests per call). CreateKey makes keys
named "latency-bench": run it against a test cluster.
"""
import http.client
import json
import os
import sys
import time


def run(conn, token, method, path, body=None, n=300):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request(method, path, body=body, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"{method} {path}: HTTP {r.status}")
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    print(f"{method} {path}: n={n} p50={lat[n // 2]:.2f} ms "
          f"p90={lat[int(n * 0.9)]:.2f} ms max={lat[-1]:.2f} ms")


def main():
    addr = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:3903"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    token = os.environ.get("GARAGE_ADMIN_TOKEN")
    if not token:
        sys.exit("set GARAGE_ADMIN_TOKEN")
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    run(conn, token, "GET", "/v2/GetClusterHealth", n=n)
    run(conn, token, "GET", "/v2/GetClusterStatus", n=n)
    run(conn, token, "GET", "/v2/ListKeys", n=n)
    run(conn, token, "POST", "/v2/CreateKey", json.dumps({"name": "latency-bench"}), n=max(1, n // 3))


if __name__ == "__main__":
    main()
