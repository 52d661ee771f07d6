#!/usr/bin/env python3
"""Latency of website endpoint requests over one keep-alive connection.

Usage: script/web-latency.py HOST:PORT SITE_HOST [n]
  HOST:PORT  the [s3_web] bind_addr (e.g. 127.0.0.1:3902)
  SITE_HOST  the Host header naming the site (e.g. site.web.garage.localhost,
             for a bucket "site" with website access and an index.html)
  n          requests per kind (default 500)

Prints p50/p90/p99 of `GET /` (the index document) and of a missing page
(404), one request at a time.
"""
import http.client
import sys
import time


def run(conn, site, path, expect, n):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request("GET", path, headers={"Host": site})
        r = conn.getresponse()
        r.read()
        if r.status != expect:
            sys.exit(f"GET {path}: HTTP {r.status}, expected {expect}")
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    print(f"GET {path} ({expect}): n={n} p50={lat[n // 2]:.2f} ms "
          f"p90={lat[int(n * 0.9)]:.2f} ms p99={lat[int(n * 0.99)]:.2f} ms")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    site = sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    run(conn, site, "/", 200, n)
    run(conn, site, "/no-such-page.html", 404, n)


if __name__ == "__main__":
    main()
