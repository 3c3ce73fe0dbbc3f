"""Load a subtree with kazoo's TreeCache and measure it (for TestCacheLoadMeasure).

Usage: treecache_load.py --connect HOST:PORT --path PATH

Starts a TreeCache on PATH and waits for its INITIALIZED event, twice: the
first run is timed, the second runs under tracemalloc to count the bytes
Python allocated for the cache and still holds once loaded. Prints one JSON
line: {"seconds": ..., "bytes": ..., "rss_bytes": ..., "nodes": ...}
(rss_bytes: growth of the resident set over the timed run).
"""

import argparse
import gc
import json
import os
import threading
import time
import tracemalloc

from kazoo.client import KazooClient
from kazoo.recipe.cache import TreeCache, TreeEvent


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def load(zk, path):
    ready = threading.Event()
    cache = TreeCache(zk, path)
    cache.listen(lambda ev: ev.event_type == TreeEvent.INITIALIZED and ready.set())
    start = time.monotonic()
    cache.start()
    if not ready.wait(300):
        raise SystemExit("TreeCache not initialized after 300s")
    return cache, time.monotonic() - start


def count(cache, path):
    n, todo = 0, [path]
    while todo:
        p = todo.pop()
        if cache.get_data(p) is None:
            continue
        n += 1
        for k in cache.get_children(p) or ():
            todo.append(p.rstrip("/") + "/" + k)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connect", required=True)
    ap.add_argument("--path", required=True)
    args = ap.parse_args()
    zk = KazooClient(hosts=args.connect, timeout=30.0)
    zk.start(timeout=30)

    gc.collect()
    before = rss()
    cache, seconds = load(zk, args.path)
    grown = rss() - before
    nodes = count(cache, args.path)
    cache.close()
    del cache
    gc.collect()

    tracemalloc.start()
    cache, _ = load(zk, args.path)
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    cache.close()
    zk.stop()
    zk.close()
    print(json.dumps({"seconds": seconds, "bytes": held, "rss_bytes": grown, "nodes": nodes}))


if __name__ == "__main__":
    main()
