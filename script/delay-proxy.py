#!/usr/bin/env python3
"""A TCP proxy that delays every byte by half a round trip each way, to put
sites 'far apart' on one machine (tc netem is not available here).

    script/delay-proxy.py --rtt-ms 50 LISTEN_PORT:TARGET_PORT [...]

Listens on 127.0.0.1:LISTEN_PORT and forwards to 127.0.0.1:TARGET_PORT.
Bytes keep their order; each chunk leaves rtt/2 after it arrived (plus or
minus half of --jitter-ms, never before the chunk ahead of it). Runs until
killed, or until every process --while-pid names has ended. script/cluster3.sh starts one in front of each node's RPC port
when GARAGE_RTT_MS is set.
"""

import argparse
import asyncio
import random
import time


async def pump(reader, writer, delay, jitter):
    """Copies reader to writer, each chunk held until its due time. At most
    256 chunks (16 MiB) wait in each direction: a slow receiver slows the
    sender, as a real link's window would."""
    queue = asyncio.Queue(maxsize=256)

    async def read():
        try:
            while True:
                data = await reader.read(1 << 16)
                due = time.monotonic() + delay + random.uniform(-jitter, jitter) / 2
                await queue.put((due, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((time.monotonic(), b""))

    async def write():
        last = 0.0
        try:
            while True:
                due, data = await queue.get()
                due = max(due, last)
                last = due
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            writer.close()

    await asyncio.gather(read(), write())


async def serve(listen, target, delay, jitter):
    async def handle(r1, w1):
        try:
            r2, w2 = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            w1.close()
            return
        await asyncio.gather(pump(r1, w2, delay, jitter), pump(r2, w1, delay, jitter))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rtt-ms", type=float, required=True)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument(
        "--while-pid", type=int, action="append", help="exit once all these processes end"
    )
    p.add_argument("routes", nargs="+", help="LISTEN_PORT:TARGET_PORT")
    a = p.parse_args()
    delay, jitter = a.rtt_ms / 2000.0, a.jitter_ms / 1000.0
    tasks = []
    for route in a.routes:
        listen, target = (int(x) for x in route.split(":"))
        tasks.append(serve(listen, target, delay, jitter))
    if a.while_pid:
        tasks.append(watch(a.while_pid))
    done, _ = await asyncio.wait(
        [asyncio.ensure_future(t) for t in tasks], return_when=asyncio.FIRST_COMPLETED
    )
    for t in done:
        t.result()


def alive(pid):
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


async def watch(pids):
    """Returns once every process of `pids` is gone."""
    while any(alive(p) for p in pids):
        await asyncio.sleep(0.5)


if __name__ == "__main__":
    asyncio.run(main())
