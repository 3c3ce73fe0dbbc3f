"""kazoo interop contender (run with /usr/bin/python3 and python3-kazoo 2.8).

Repeatedly acquires a kazoo lock recipe, marks the shared marker directory
while holding it and reports any overlap with another holder.  Implements the
same command-line contract as CuratorContender.java (see interop.go).

Exit codes: 0 done, 1 any failure (including usage errors), 3 violation,
4 recipe unsupported in the selected --node-names mode.

Node naming (--node-names):

curator (default)
    kazoo 2.8 can be told to *see* Curator's znodes (extra_lock_patterns), but
    Curator cannot see kazoo's stock znodes: Curator sorts every child of the
    lock path by the text after the last occurrence of its lock name
    ("lock-", "__READ__"/"__WRIT__", "latch-") and kazoo's stock names
    ("<hex>__lock__<seq>", "<hex>__rlock__<seq>") contain none of them, so
    Curator sorts them by their random hex prefix instead of their sequence
    number.  In this mode the contender therefore subclasses kazoo's lock
    classes so their znodes are named "<hex>-lock-<seq>",
    "<hex>-__WRIT__<seq>", "<hex>-__READ__<seq>" and "<hex>-latch-<seq>",
    which Curator parses exactly like its own.  The read side also works
    around kazoo 2.8.0's read-lock deadlock (python-zk/kazoo#649, a reader
    waiting on writers queued *after* it).

stock
    Uses kazoo's Lock / ReadLock / WriteLock unchanged (apart from
    extra_lock_patterns).  Not interoperable with Curator; useful only to
    demonstrate that.  latch is UNSUPPORTED here (kazoo's Election uses its
    own, non-Curator layout).
"""

import argparse
import logging
import os
import re
import sys
import time

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_VIOLATION = 3
EXIT_UNSUPPORTED = 4


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fail(msg):
    sys.stderr.write("error: %s\n" % msg)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(EXIT_FAILURE)


def violation(details):
    out("VIOLATION " + details)
    sys.stderr.flush()
    # Do not release anything: the overlap is the result.
    os._exit(EXIT_VIOLATION)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        fail("usage error: " + message)


def parse_args(argv):
    p = _Parser(prog="kazoo_contender.py")
    p.add_argument("--connect", required=True)
    p.add_argument("--path", required=True)
    p.add_argument(
        "--recipe",
        required=True,
        choices=["mutex", "read", "write", "latch"] + sorted(QUEUE_RECIPES),
    )
    p.add_argument("--count", required=True, type=int)
    p.add_argument("--hold-ms", required=True, type=int)
    p.add_argument("--marker", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--session-timeout-ms", type=int, default=10000)
    p.add_argument("--acquire-timeout-ms", type=int, default=60000)
    p.add_argument("--start-file")
    p.add_argument(
        "--node-names", choices=["curator", "stock"], default="curator"
    )
    a = p.parse_args(argv)
    if a.count < 0 or a.hold_ms < 0:
        p.error("--count and --hold-ms must be >= 0")
    if a.session_timeout_ms < 1 or a.acquire_timeout_ms < 1:
        p.error("timeouts must be >= 1")
    if not a.path.startswith("/"):
        p.error("--path must be absolute")
    if not os.path.isdir(a.marker):
        p.error("--marker %s is not a directory" % a.marker)
    return a


# Trailing sequence number of a lock znode (same shape kazoo matches).
_SEQ_RE = re.compile(r"(-?\d{10})$")


# The extra_lock_patterns of each recipe's lock: the names of Curator's
# znodes that count as contenders.
_PATTERNS = {
    "mutex": ["-lock-"],
    "write": ["__WRIT__", "__READ__"],
    "read": ["__WRIT__"],
    "latch": ["-latch-"],
}


def _factories(classes):
    """Returns {recipe: factory(client, path, identifier)} for {recipe:
    lock class}, each lock made with the recipe's _PATTERNS."""

    def factory(cls, patterns):
        return lambda c, p, i: cls(
            c, p, i, extra_lock_patterns=list(patterns)
        )

    return {r: factory(cls, _PATTERNS[r]) for r, cls in classes.items()}


def make_recipes(stock):
    """Returns {recipe: factory(client, path, identifier)}."""
    from kazoo.recipe.lock import Lock, ReadLock, WriteLock
    from kazoo.retry import ForceRetryError

    if stock:
        return _factories(
            {"mutex": Lock, "write": WriteLock, "read": ReadLock}
        )

    class CuratorMutex(Lock):
        # Curator InterProcessMutex: _c_<uuid>-lock-<seq>
        _NODE_NAME = "-lock-"

    class CuratorLatch(Lock):
        # Curator LeaderLatch: _c_<uuid>-latch-<seq>; the leader is the
        # lowest sequence number, exactly the exclusive-lock protocol.
        _NODE_NAME = "-latch-"

    class CuratorWriteLock(WriteLock):
        # Curator InterProcessReadWriteLock writer: _c_<uuid>-__WRIT__<seq>
        _NODE_NAME = "-__WRIT__"

    class CuratorReadLock(ReadLock):
        # Curator InterProcessReadWriteLock reader: _c_<uuid>-__READ__<seq>
        _NODE_NAME = "-__READ__"

        def _get_predecessor(self, node):
            # kazoo 2.8.0's ReadLock._get_predecessor never finds its own
            # node among the contenders (readers do not match the writer
            # patterns) and so returns the *last* writer, even one queued
            # after us, which then waits for us: deadlock (kazoo#649).  Only
            # writers with a lower sequence number may block a reader.
            children = self.client.get_children(self.path)
            if node not in children:
                raise ForceRetryError()
            own = _SEQ_RE.search(node).group(1)
            pred, pred_seq = None, None
            for child in children:
                m = self._contenders_re.search(child)
                if m is None:
                    continue
                seq = m.group(1)
                if seq < own and (pred_seq is None or seq > pred_seq):
                    pred, pred_seq = child, seq
            return pred

    return _factories(
        {
            "mutex": CuratorMutex,
            "write": CuratorWriteLock,
            "read": CuratorReadLock,
            "latch": CuratorLatch,
        }
    )


def mark(marker, shared, ident, n):
    if shared:
        mine = os.path.join(marker, "shared-%s-%d" % (ident, n))
        try:
            fd = os.open(mine, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            fail("marker %s already exists: duplicate --id?" % mine)
        os.close(fd)
        excl = os.path.join(marker, "exclusive")
        if os.path.exists(excl):
            violation(
                "%s acquisition %d: read holder found %s" % (ident, n, excl)
            )
        return mine
    mine = os.path.join(marker, "exclusive")
    try:
        fd = os.open(mine, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        violation(
            "%s acquisition %d: exclusive holder found existing %s"
            % (ident, n, mine)
        )
    os.close(fd)
    for name in os.listdir(marker):
        if name.startswith("shared-"):
            violation(
                "%s acquisition %d: exclusive holder found %s"
                % (ident, n, os.path.join(marker, name))
            )
    return mine


def unmark(mine, ident, n):
    try:
        os.unlink(mine)
    except FileNotFoundError:
        violation(
            "%s acquisition %d: marker %s vanished while held"
            % (ident, n, mine)
        )


# The queue recipes (see interop.go): kazoo's Queue and LockingQueue.
QUEUE_RECIPES = {
    "queue-offer",
    "queue-take",
    "locking-queue-offer",
    "locking-queue-take",
}


def run_queue(zk, args):
    """Offers or takes --count items; a taker prints "ITEM <data>"."""
    from kazoo.recipe.queue import LockingQueue, Queue

    locking = args.recipe.startswith("locking-")
    q = LockingQueue(zk, args.path) if locking else Queue(zk, args.path)
    timeout = args.acquire_timeout_ms / 1000.0
    for n in range(1, args.count + 1):
        if args.recipe.endswith("-offer"):
            q.put(("%s-%d" % (args.id, n)).encode())
            continue
        deadline = time.monotonic() + timeout
        while True:
            # Queue.get never waits; LockingQueue.get waits up to timeout.
            item = q.get(timeout) if locking else q.get()
            if item is not None:
                break
            if time.monotonic() > deadline:
                fail("no item within %dms after %d" % (args.acquire_timeout_ms, n - 1))
            time.sleep(0.005)
        out("ITEM " + item.decode())
        if locking and not q.consume():
            fail("could not consume %r: lock lost" % item)


def main(argv):
    args = parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    try:
        from kazoo.client import KazooClient
        from kazoo.exceptions import LockTimeout
    except ImportError as e:
        fail("cannot import kazoo (apt-get install python3-kazoo): %s" % e)

    recipes = make_recipes(args.node_names == "stock")
    if args.recipe not in recipes and args.recipe not in QUEUE_RECIPES:
        out("UNSUPPORTED %s %s" % (args.recipe, args.node_names))
        return EXIT_UNSUPPORTED
    factory = recipes.get(args.recipe)
    shared = args.recipe == "read"
    acquire_timeout = args.acquire_timeout_ms / 1000.0

    zk = KazooClient(
        hosts=args.connect, timeout=args.session_timeout_ms / 1000.0
    )
    try:
        zk.start(timeout=30)
    except Exception as e:  # kazoo raises a handler-specific timeout
        fail("could not connect to %s: %r" % (args.connect, e))
    out("READY " + args.id)
    if args.start_file:
        deadline = time.monotonic() + acquire_timeout
        while not os.path.exists(args.start_file):
            if time.monotonic() > deadline:
                fail("start file %s did not appear" % args.start_file)
            time.sleep(0.005)

    if args.recipe in QUEUE_RECIPES:
        run_queue(zk, args)
        zk.stop()
        zk.close()
        out("DONE " + args.id)
        return EXIT_OK

    for n in range(1, args.count + 1):
        lock = factory(zk, args.path, args.id)
        try:
            got = lock.acquire(blocking=True, timeout=acquire_timeout)
        except LockTimeout:
            got = False
        if not got:
            fail(
                "timed out after %dms acquiring %s %s"
                % (args.acquire_timeout_ms, args.recipe, args.path)
            )
        out("ACQ %s %d" % (args.id, n))
        mine = mark(args.marker, shared, args.id, n)
        if args.hold_ms:
            time.sleep(args.hold_ms / 1000.0)
        unmark(mine, args.id, n)
        lock.release()

    zk.stop()
    zk.close()
    out("DONE " + args.id)
    return EXIT_OK


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: B902 - report everything, exit 1
        import traceback

        traceback.print_exc()
        fail("%s: %s" % (type(e).__name__, e))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
