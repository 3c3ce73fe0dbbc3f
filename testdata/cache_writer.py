"""Churn writer for the cache tests (run with /usr/bin/python3, python3-kazoo 2.8).

Usage: cache_writer.py --connect HOST:PORT --root PATH --seed N

Makes random changes below ROOT (which it creates if missing and never
deletes) with kazoo, the only writer there, and reports each one with the
zxids the server gave it, so that the test knows the whole history.

Protocol on stdin/stdout, one line each:
  -> READY
  <- round R N     make N random changes, then
  -> {"op": "create"|"set"|"delete", "path": ..., "czxid": ..., "mzxid": ...,
      "version": ..., "data": ...}   one line per change, in zxid order
  -> DONE R
  <- quit          close the session and exit 0

Changes: create a node (data unique to the write), set its data (sometimes
to the value it already has), delete a leaf; and, in one transaction,
create a node with a child, or delete a leaf with its parent. Node names
come from a small set, so paths are made, deleted and made again. Any
failure goes to stderr with exit status 1.
"""

import argparse
import json
import random
import sys
import time

from kazoo.client import KazooClient

NAMES = ["a", "b", "c", "d"]
DEPTH = 3


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connect", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--seed", type=int, required=True)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    zk = KazooClient(hosts=args.connect, timeout=10.0)
    zk.start(timeout=30)
    root = args.root
    zk.ensure_path(root)

    # The writer's view of the tree below root: path -> [czxid, mzxid, version, data].
    tree = {}
    universe = []

    def grow(prefix, depth):
        for n in NAMES:
            p = prefix + "/" + n
            universe.append(p)
            if depth < DEPTH:
                grow(p, depth + 1)

    grow(root, 1)
    counter = [0]

    def fresh():
        counter[0] += 1
        return "w%d-%d" % (args.seed, counter[0])

    def parent(p):
        return p[: p.rindex("/")]

    def kids(p):
        return [q for q in tree if parent(q) == p]

    def report(op, p, st, data):
        out(json.dumps({"op": op, "path": p, "czxid": st.czxid, "mzxid": st.mzxid,
                        "version": st.version, "data": data}))

    def report_delete(p):
        czxid, mzxid, version, data = tree.pop(p)
        out(json.dumps({"op": "delete", "path": p, "czxid": czxid, "mzxid": mzxid,
                        "version": version, "data": data}))

    def create(p, data):
        _, st = zk.create(p, data.encode(), include_data=True)
        tree[p] = [st.czxid, st.mzxid, st.version, data]
        report("create", p, st, data)

    def change():
        p = rnd.choice(universe)
        up = parent(p)
        exists = p in tree
        up_exists = up == root or up in tree
        r = rnd.random()
        if exists:
            if not kids(p) and r < 0.4:
                if up != root and kids(up) == [p] and r < 0.08:
                    t = zk.transaction()
                    t.delete(p, version=tree[p][2])
                    t.delete(up, version=tree[up][2])
                    check(t.commit())
                    report_delete(p)
                    report_delete(up)
                else:
                    zk.delete(p, version=tree[p][2])
                    report_delete(p)
                return True
            data = tree[p][3] if r > 0.9 else fresh()
            st = zk.set(p, data.encode(), version=tree[p][2])
            tree[p] = [st.czxid, st.mzxid, st.version, data]
            report("set", p, st, data)
            return True
        if up_exists:
            create(p, fresh())
            return True
        gp = parent(up)
        if (gp == root or gp in tree) and r < 0.3:
            d1, d2 = fresh(), fresh()
            t = zk.transaction()
            t.create(up, d1.encode())
            t.create(p, d2.encode())
            check(t.commit())
            for q, d in ((up, d1), (p, d2)):
                st = zk.exists(q)
                tree[q] = [st.czxid, st.mzxid, st.version, d]
                report("create", q, st, d)
            return True
        return False

    def check(results):
        for res in results:
            if isinstance(res, Exception):
                raise res

    out("READY")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        if words[0] != "round":
            raise SystemExit("unknown command %r" % line)
        n = int(words[2])
        made = 0
        while made < n:
            if change():
                made += 1
                if rnd.random() < 0.3:
                    time.sleep(rnd.random() * 0.01)
        out("DONE " + words[1])
    zk.stop()
    zk.close()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - report anything and fail
        sys.stderr.write("error: %r\n" % (e,))
        sys.stderr.flush()
        sys.exit(1)
