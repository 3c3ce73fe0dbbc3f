// CuratorContender is an interop test contender built on Apache Curator.
//
// It repeatedly acquires one Curator recipe (InterProcessMutex, the read or
// write side of InterProcessReadWriteLock, LeaderLatch, or a lease of
// InterProcessSemaphoreV2, or an InterProcessMultiLock of the comma-separated
// paths given as --path), marks the shared marker directory while holding
// it, and reports any overlap with another holder (for a semaphore: more
// holders than leases). With --recipe member it instead joins a group as a
// Curator GroupMember and reports the members it sees until --stop-file
// appears; with --recipe double-barrier it passes a DistributedDoubleBarrier
// once and reports anyone who passed it too early; with --recipe barrier it
// waits on a DistributedBarrier, and with --recipe barrier-gate it sets one
// and removes it when --stop-file appears; the data recipes (DataRecipes)
// and the node recipes (Nodes: PersistentNode, PersistentTtlNode) are
// described where they are. See interop.go for the command-line contract; the kazoo contender
// (kazoo_contender.py) implements the same contract.
//
// Exit codes: 0 done, 1 any failure (including usage errors), 3 violation.

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorContender {
    static final int EXIT_OK = 0;
    static final int EXIT_FAILURE = 1;
    static final int EXIT_VIOLATION = 3;

    /** Thrown for bad command lines; reported on stderr with exit code 1. */
    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String msg) {
            super(msg);
        }
    }

    /** One acquire/release cycle of a recipe. */
    interface Holder {
        void acquire(long timeoutMs) throws Exception;

        void release() throws Exception;
    }

    /** Adapts a Curator InterProcessLock (mutex, read lock, write lock). */
    static final class LockHolder implements Holder {
        private final InterProcessLock lock;
        private final String what;

        LockHolder(InterProcessLock lock, String what) {
            this.lock = lock;
            this.what = what;
        }

        @Override
        public void acquire(long timeoutMs) throws Exception {
            if (!lock.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("timed out after " + timeoutMs + "ms acquiring " + what);
            }
        }

        @Override
        public void release() throws Exception {
            lock.release();
        }
    }

    /** Takes one lease of an InterProcessSemaphoreV2 per cycle. */
    static final class LeaseHolder implements Holder {
        private final InterProcessSemaphoreV2 semaphore;
        private final String what;
        private Lease lease;

        LeaseHolder(InterProcessSemaphoreV2 semaphore, String what) {
            this.semaphore = semaphore;
            this.what = what;
        }

        @Override
        public void acquire(long timeoutMs) throws Exception {
            lease = semaphore.acquire(timeoutMs, TimeUnit.MILLISECONDS);
            if (lease == null) {
                throw new IllegalStateException("timed out after " + timeoutMs + "ms acquiring a lease of " + what);
            }
        }

        @Override
        public void release() throws Exception {
            Lease l = lease;
            lease = null;
            if (l != null) {
                semaphore.returnLease(l);
            }
        }
    }

    /** Uses a fresh LeaderLatch per cycle: start, await leadership, close. */
    static final class LatchHolder implements Holder {
        private final CuratorFramework client;
        private final String path;
        private final String id;
        private LeaderLatch latch;

        LatchHolder(CuratorFramework client, String path, String id) {
            this.client = client;
            this.path = path;
            this.id = id;
        }

        @Override
        public void acquire(long timeoutMs) throws Exception {
            latch = new LeaderLatch(client, path, id);
            latch.start();
            if (!latch.await(timeoutMs, TimeUnit.MILLISECONDS) || !latch.hasLeadership()) {
                latch.close();
                latch = null;
                throw new IllegalStateException("timed out after " + timeoutMs + "ms awaiting leadership of " + path);
            }
        }

        @Override
        public void release() throws Exception {
            LeaderLatch l = latch;
            latch = null;
            if (l != null) {
                l.close();
            }
        }
    }

    public static void main(String[] argv) {
        int code;
        try {
            code = run(argv);
        } catch (UsageException e) {
            System.err.println("usage error: " + e.getMessage());
            System.err.println("usage: CuratorContender --connect HOST:PORT[,...] --path /p --recipe mutex|read|write|latch|semaphore|multilock|member|double-barrier|barrier|barrier-gate"
                    + " --count N --hold-ms M --marker DIR --id ID [--leases N] [--members N] [--session-timeout-ms T]"
                    + " [--acquire-timeout-ms T] [--start-file F] [--stop-file F]");
            code = EXIT_FAILURE;
        } catch (Throwable e) {
            System.err.println("error: " + e);
            e.printStackTrace(System.err);
            code = EXIT_FAILURE;
        }
        System.out.flush();
        System.err.flush();
        // Curator/ZooKeeper threads must not keep the JVM alive.
        System.exit(code);
    }

    static Map<String, String> parse(String[] argv) throws UsageException {
        Map<String, String> opts = new HashMap<>();
        opts.put("session-timeout-ms", "10000");
        opts.put("acquire-timeout-ms", "60000");
        String[] known = {"connect", "path", "recipe", "count", "hold-ms", "marker", "id",
            "session-timeout-ms", "acquire-timeout-ms", "start-file", "leases", "stop-file", "members",
            "service", "lock-path", "ttl-ms"};
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) {
                throw new UsageException("unexpected argument " + a);
            }
            String key = a.substring(2);
            String val;
            int eq = key.indexOf('=');
            if (eq >= 0) {
                val = key.substring(eq + 1);
                key = key.substring(0, eq);
            } else {
                if (i + 1 >= argv.length) {
                    throw new UsageException("missing value for " + a);
                }
                val = argv[++i];
            }
            boolean ok = false;
            for (String k : known) {
                ok |= k.equals(key);
            }
            if (!ok) {
                throw new UsageException("unknown flag --" + key);
            }
            opts.put(key, val);
        }
        for (String k : new String[] {"connect", "path", "recipe", "count", "hold-ms", "marker", "id"}) {
            if (!opts.containsKey(k) || opts.get(k).isEmpty()) {
                throw new UsageException("--" + k + " is required");
            }
        }
        return opts;
    }

    static int intOpt(Map<String, String> opts, String key, int min) throws UsageException {
        int v;
        try {
            v = Integer.parseInt(opts.get(key));
        } catch (NumberFormatException e) {
            throw new UsageException("--" + key + " must be an integer, got " + opts.get(key));
        }
        if (v < min) {
            throw new UsageException("--" + key + " must be >= " + min);
        }
        return v;
    }

    static int run(String[] argv) throws Exception {
        Map<String, String> opts = parse(argv);
        String connect = opts.get("connect");
        String path = opts.get("path");
        String recipe = opts.get("recipe");
        String id = opts.get("id");
        int count = intOpt(opts, "count", 0);
        int holdMs = intOpt(opts, "hold-ms", 0);
        int sessionTimeoutMs = intOpt(opts, "session-timeout-ms", 1);
        int acquireTimeoutMs = intOpt(opts, "acquire-timeout-ms", 1);
        Path marker = Paths.get(opts.get("marker"));
        if (DataRecipes.NAMES.contains(recipe)) {
            return DataRecipes.run(opts, connect, path, recipe, id, count, sessionTimeoutMs, acquireTimeoutMs);
        }
        if (Nodes.NAMES.contains(recipe)) {
            return Nodes.run(opts, connect, path, recipe, id, marker, sessionTimeoutMs, acquireTimeoutMs);
        }
        boolean shared;
        int leases = 0; // a semaphore's: at most this many holders at once
        switch (recipe) {
            case "mutex":
            case "write":
            case "latch":
            case "multilock":
                shared = false;
                break;
            case "read":
                shared = true;
                break;
            case "member":
            case "barrier-gate":
                shared = false;
                if (!opts.containsKey("stop-file")) {
                    throw new UsageException("--stop-file is required with --recipe " + recipe);
                }
                break;
            case "barrier":
                shared = false;
                break;
            case "double-barrier":
                shared = false;
                if (!opts.containsKey("members")) {
                    throw new UsageException("--members is required with --recipe double-barrier");
                }
                intOpt(opts, "members", 1);
                break;
            case "semaphore":
                shared = false;
                if (!opts.containsKey("leases")) {
                    throw new UsageException("--leases is required with --recipe semaphore");
                }
                leases = intOpt(opts, "leases", 1);
                break;
            default:
                throw new UsageException("--recipe must be mutex, read, write, latch, semaphore, multilock, member, double-barrier,"
                        + " barrier or barrier-gate, got " + recipe);
        }
        if (leases == 0 && opts.containsKey("leases")) {
            throw new UsageException("--leases is only for --recipe semaphore");
        }
        if (!Files.isDirectory(marker)) {
            throw new UsageException("--marker " + marker + " is not a directory");
        }

        CuratorFramework client = newClient(connect, sessionTimeoutMs);
        try {
            ready(client, opts, connect, id, acquireTimeoutMs);
            if (recipe.equals("member")) {
                member(client, path, id, Paths.get(opts.get("stop-file")), acquireTimeoutMs);
                return EXIT_OK;
            }
            if (recipe.equals("barrier")) {
                boolean set = client.checkExists().forPath(path) != null;
                System.out.println((set ? "WAITING " : "NOT-SET ") + id);
                System.out.flush();
                if (!new DistributedBarrier(client, path).waitOnBarrier(acquireTimeoutMs, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("barrier " + path + " still set after " + acquireTimeoutMs + "ms");
                }
                System.out.println("PASSED " + id);
                System.out.println("DONE " + id);
                System.out.flush();
                return EXIT_OK;
            }
            if (recipe.equals("barrier-gate")) {
                DistributedBarrier b = new DistributedBarrier(client, path);
                b.setBarrier();
                System.out.println("SET " + id);
                System.out.flush();
                awaitFile(Paths.get(opts.get("stop-file")), acquireTimeoutMs);
                b.removeBarrier();
                System.out.println("DONE " + id);
                System.out.flush();
                return EXIT_OK;
            }
            if (recipe.equals("double-barrier")) {
                doubleBarrier(client, path, id, intOpt(opts, "members", 1), marker, holdMs, acquireTimeoutMs);
                return EXIT_OK;
            }

            Holder holder;
            byte[] data = id.getBytes(StandardCharsets.UTF_8);
            switch (recipe) {
                case "mutex":
                    holder = new LockHolder(new InterProcessMutex(client, path), "mutex " + path);
                    break;
                case "read":
                    holder = new LockHolder(new InterProcessReadWriteLock(client, path, data).readLock(),
                            "read lock " + path);
                    break;
                case "write":
                    holder = new LockHolder(new InterProcessReadWriteLock(client, path, data).writeLock(),
                            "write lock " + path);
                    break;
                case "semaphore":
                    holder = new LeaseHolder(new InterProcessSemaphoreV2(client, path, leases), "semaphore " + path);
                    break;
                case "multilock":
                    holder = new LockHolder(new InterProcessMultiLock(client, Arrays.asList(path.split(","))),
                            "multilock " + path);
                    break;
                default:
                    holder = new LatchHolder(client, path, id);
                    break;
            }

            for (int n = 1; n <= count; n++) {
                holder.acquire(acquireTimeoutMs);
                System.out.println("ACQ " + id + " " + n);
                System.out.flush();
                List<Path> mine = recipe.equals("multilock") ? markEach(marker, path, id, n)
                        : List.of(leases > 0 ? markLease(marker, leases, id, n) : mark(marker, shared, id, n));
                if (holdMs > 0) {
                    Thread.sleep(holdMs);
                }
                for (Path m : mine) {
                    unmark(m, id, n);
                }
                holder.release();
            }
        } finally {
            client.close();
        }
        System.out.println("DONE " + id);
        System.out.flush();
        return EXIT_OK;
    }

    /**
     * Joins the group on path as a GroupMember with id and payload id, and
     * prints "MEMBERS id=payload,..." (sorted by id) at first and whenever
     * its view of the group changes, until stop exists or timeoutMs passes;
     * then it leaves and prints "DONE id".
     */
    static void member(CuratorFramework client, String path, String id, Path stop, long timeoutMs) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        String last = null;
        try (GroupMember m = new GroupMember(client, path, id, id.getBytes(StandardCharsets.UTF_8))) {
            m.start();
            while (!Files.exists(stop)) {
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException("stop file " + stop + " did not appear within " + timeoutMs + "ms");
                }
                StringBuilder view = new StringBuilder();
                for (Map.Entry<String, byte[]> e : new TreeMap<>(m.getCurrentMembers()).entrySet()) {
                    if (view.length() > 0) {
                        view.append(',');
                    }
                    view.append(e.getKey()).append('=').append(new String(e.getValue(), StandardCharsets.UTF_8));
                }
                if (!view.toString().equals(last)) {
                    last = view.toString();
                    System.out.println("MEMBERS " + last);
                    System.out.flush();
                }
                Thread.sleep(10);
            }
        }
        System.out.println("DONE " + id);
        System.out.flush();
    }

    /**
     * Passes the double barrier for members participants on path once: marks
     * arrived-ID, enters, checks that members participants have arrived,
     * sleeps holdMs, marks leaving-ID, leaves, and checks that members
     * participants have started leaving; then prints "DONE id".
     */
    static void doubleBarrier(CuratorFramework client, String path, String id, int members, Path marker, int holdMs,
            long timeoutMs) throws Exception {
        DistributedDoubleBarrier b = new DistributedDoubleBarrier(client, path, members);
        Files.createFile(marker.resolve("arrived-" + id));
        if (!b.enter(timeoutMs, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("timed out after " + timeoutMs + "ms entering the double barrier " + path);
        }
        System.out.println("ACQ " + id + " 1");
        System.out.flush();
        int arrived = count(marker, "arrived-*");
        if (arrived < members) {
            violation(id + " entered with " + arrived + " of " + members + " participants arrived");
        }
        if (holdMs > 0) {
            Thread.sleep(holdMs);
        }
        Files.createFile(marker.resolve("leaving-" + id));
        if (!b.leave(timeoutMs, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("timed out after " + timeoutMs + "ms leaving the double barrier " + path);
        }
        int leaving = count(marker, "leaving-*");
        if (leaving < members) {
            violation(id + " left with " + leaving + " of " + members + " participants leaving");
        }
        System.out.println("DONE " + id);
        System.out.flush();
    }

    static int count(Path dir, String glob) throws IOException {
        int n = 0;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, glob)) {
            for (Path p : ds) {
                n++;
            }
        }
        return n;
    }

    /** The contender's client of connect, not started yet. */
    static CuratorFramework newClient(String connect, int sessionTimeoutMs) {
        return CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionTimeoutMs)
                .connectionTimeoutMs(Math.min(sessionTimeoutMs, 15000))
                .retryPolicy(new ExponentialBackoffRetry(100, 10, 2000))
                .build();
    }

    /**
     * Starts client and waits (30 s at most) until it is connected, prints
     * "READY id", then waits for the start file if there is one.
     */
    static void ready(CuratorFramework client, Map<String, String> opts, String connect, String id, int acquireTimeoutMs)
            throws Exception {
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("could not connect to " + connect + " within 30s");
        }
        System.out.println("READY " + id);
        System.out.flush();
        if (opts.containsKey("start-file")) {
            awaitFile(Paths.get(opts.get("start-file")), acquireTimeoutMs);
        }
    }

    /** Blocks until f exists (a start barrier shared by all contenders). */
    static void awaitFile(Path f, long timeoutMs) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!Files.exists(f)) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("start file " + f + " did not appear within " + timeoutMs + "ms");
            }
            Thread.sleep(5);
        }
    }

    /** Reports an overlap and terminates the process with exit code 3. */
    static void violation(String details) {
        System.out.println("VIOLATION " + details);
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(EXIT_VIOLATION);
    }

    static Path mark(Path dir, boolean shared, String id, int n) throws IOException {
        if (shared) {
            Path mine = dir.resolve("shared-" + id + "-" + n);
            try {
                Files.createFile(mine);
            } catch (FileAlreadyExistsException e) {
                throw new IllegalStateException("marker " + mine + " already exists: duplicate --id?");
            }
            if (Files.exists(dir.resolve("exclusive"))) {
                violation(id + " acquisition " + n + ": read holder found " + dir.resolve("exclusive"));
            }
            return mine;
        }
        Path mine = dir.resolve("exclusive");
        try {
            Files.createFile(mine);
        } catch (FileAlreadyExistsException e) {
            violation(id + " acquisition " + n + ": exclusive holder found existing " + mine);
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "shared-*")) {
            for (Path p : ds) {
                violation(id + " acquisition " + n + ": exclusive holder found " + p);
            }
        }
        return mine;
    }

    /**
     * A multilock holder's marks: an exclusive mark in the subdirectory of
     * dir named after each of the comma-separated paths ('/' replaced by '_').
     */
    static List<Path> markEach(Path dir, String paths, String id, int n) throws IOException {
        List<Path> marks = new ArrayList<>();
        for (String p : paths.split(",")) {
            Path sub = Files.createDirectories(dir.resolve(p.replace('/', '_')));
            marks.add(mark(sub, false, id, n));
        }
        return marks;
    }

    /** A semaphore holder's mark: its own file, then no more than leases such files. */
    static Path markLease(Path dir, int leases, String id, int n) throws IOException {
        Path mine = dir.resolve("lease-" + id + "-" + n);
        try {
            Files.createFile(mine);
        } catch (FileAlreadyExistsException e) {
            throw new IllegalStateException("marker " + mine + " already exists: duplicate --id?");
        }
        int holders = count(dir, "lease-*");
        if (holders > leases) {
            violation(id + " acquisition " + n + ": " + holders + " lease holders marked, " + leases + " leases");
        }
        return mine;
    }

    static void unmark(Path mine, String id, int n) throws IOException {
        try {
            Files.delete(mine);
        } catch (NoSuchFileException e) {
            // Someone else removed our marker while we held the recipe.
            violation(id + " acquisition " + n + ": marker " + mine + " vanished while held");
        }
    }

    /**
     * The data recipes: counters, queues and service discovery. Each prints
     * "READY id" once connected, waits for the start file, then:
     * shared-count adds one to SharedCount(path, seed 0) count times, by
     * trySetCount on the value it read, again until it succeeds;
     * atomic-long increments DistributedAtomicLong(path) count times (with
     * --lock-path, promoted to that lock after one failed try), again
     * until each succeeds; queue-offer offers "id-n" (n from 1 to count) to
     * SimpleDistributedQueue(path); queue-take takes count items from it,
     * printing "ITEM data" for each; discovery-register registers the
     * instance id of --service under the base path (address 127.0.0.1,
     * port 9000, payload the String "java-id", uriSpec
     * "{scheme}://{address}:{port}"), prints "REGISTERED id" and
     * unregisters once the stop file exists; discovery-query follows
     * --service through a ServiceCache and prints
     * "INSTANCES id=payload@address:port,..." (sorted by id) at first and
     * after every change, until the stop file exists; discovery-provider
     * registers the instance id of --service (address 127.0.0.1, port
     * 9100, payload the POJO Info("java", 7)), prints "REGISTERED id", then
     * follows --service through a ServiceProvider (random strategy) and
     * prints "PROVIDER id=payload,..." (its getAllInstances, sorted by id)
     * at first and after every change, until the stop file exists. All print
     * "DONE id" at the end.
     */
    /** Info is the POJO payload of discovery-provider; Go writes and reads it too. */
    public static final class Info {
        public String zone;
        public int weight;

        public Info() {
        }

        Info(String zone, int weight) {
            this.zone = zone;
            this.weight = weight;
        }

        @Override
        public String toString() {
            return "Info(" + zone + "," + weight + ")";
        }
    }

    static final class DataRecipes {
        static final java.util.Set<String> NAMES = new java.util.HashSet<>(java.util.Arrays.asList(
                "shared-count", "atomic-long", "queue-offer", "queue-take", "discovery-register", "discovery-query",
                "discovery-provider"));

        static int run(Map<String, String> opts, String connect, String path, String recipe, String id, int count,
                int sessionTimeoutMs, int acquireTimeoutMs) throws Exception {
            if (recipe.startsWith("discovery-") && (!opts.containsKey("service") || !opts.containsKey("stop-file"))) {
                throw new UsageException("--service and --stop-file are required with --recipe " + recipe);
            }
            CuratorFramework client = newClient(connect, sessionTimeoutMs);
            try {
                ready(client, opts, connect, id, acquireTimeoutMs);
                switch (recipe) {
                    case "shared-count":
                        sharedCount(client, path, count);
                        break;
                    case "atomic-long":
                        atomicLong(client, path, opts.get("lock-path"), count);
                        break;
                    case "queue-offer": {
                        org.apache.curator.framework.recipes.queue.SimpleDistributedQueue q =
                                new org.apache.curator.framework.recipes.queue.SimpleDistributedQueue(client, path);
                        for (int n = 1; n <= count; n++) {
                            q.offer((id + "-" + n).getBytes(StandardCharsets.UTF_8));
                        }
                        break;
                    }
                    case "queue-take": {
                        org.apache.curator.framework.recipes.queue.SimpleDistributedQueue q =
                                new org.apache.curator.framework.recipes.queue.SimpleDistributedQueue(client, path);
                        for (int n = 1; n <= count; n++) {
                            byte[] item = q.poll(acquireTimeoutMs, TimeUnit.MILLISECONDS);
                            if (item == null) {
                                throw new IllegalStateException("no item within " + acquireTimeoutMs + "ms after " + (n - 1));
                            }
                            System.out.println("ITEM " + new String(item, StandardCharsets.UTF_8));
                            System.out.flush();
                        }
                        break;
                    }
                    case "discovery-register":
                        register(client, path, opts.get("service"), id, Paths.get(opts.get("stop-file")), acquireTimeoutMs);
                        break;
                    case "discovery-provider":
                        provider(client, path, opts.get("service"), id, Paths.get(opts.get("stop-file")), acquireTimeoutMs);
                        break;
                    default:
                        query(client, path, opts.get("service"), Paths.get(opts.get("stop-file")), acquireTimeoutMs);
                        break;
                }
            } finally {
                client.close();
            }
            System.out.println("DONE " + id);
            System.out.flush();
            return EXIT_OK;
        }

        static void sharedCount(CuratorFramework client, String path, int count) throws Exception {
            try (org.apache.curator.framework.recipes.shared.SharedCount c =
                    new org.apache.curator.framework.recipes.shared.SharedCount(client, path, 0)) {
                c.start();
                for (int n = 0; n < count; n++) {
                    while (true) {
                        org.apache.curator.framework.recipes.shared.VersionedValue<Integer> v = c.getVersionedValue();
                        if (c.trySetCount(v, v.getValue() + 1)) {
                            break;
                        }
                    }
                }
            }
        }

        static void atomicLong(CuratorFramework client, String path, String lockPath, int count) throws Exception {
            org.apache.curator.retry.RetryNTimes optimistic = new org.apache.curator.retry.RetryNTimes(lockPath == null ? 100 : 1, 0);
            org.apache.curator.framework.recipes.atomic.DistributedAtomicLong a = lockPath == null
                    ? new org.apache.curator.framework.recipes.atomic.DistributedAtomicLong(client, path, optimistic)
                    : new org.apache.curator.framework.recipes.atomic.DistributedAtomicLong(client, path, optimistic,
                            org.apache.curator.framework.recipes.atomic.PromotedToLock.builder().lockPath(lockPath)
                                    .retryPolicy(new org.apache.curator.retry.RetryNTimes(100, 0)).build());
            for (int n = 0; n < count; n++) {
                while (!a.increment().succeeded()) {
                    // every try failed: try again
                }
            }
        }

        static void register(CuratorFramework client, String base, String service, String id, Path stop, long timeoutMs)
                throws Exception {
            org.apache.curator.x.discovery.ServiceInstance<String> inst =
                    org.apache.curator.x.discovery.ServiceInstance.<String>builder()
                            .name(service).id(id).address("127.0.0.1").port(9000).payload("java-" + id)
                            .uriSpec(new org.apache.curator.x.discovery.UriSpec("{scheme}://{address}:{port}"))
                            .build();
            try (org.apache.curator.x.discovery.ServiceDiscovery<String> d =
                    org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(String.class)
                            .client(client).basePath(base).build()) {
                d.start();
                d.registerService(inst);
                System.out.println("REGISTERED " + id);
                System.out.flush();
                awaitFile(stop, timeoutMs);
                d.unregisterService(inst);
            }
        }

        static void provider(CuratorFramework client, String base, String service, String id, Path stop, long timeoutMs)
                throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            org.apache.curator.x.discovery.ServiceInstance<Object> inst =
                    org.apache.curator.x.discovery.ServiceInstance.<Object>builder()
                            .name(service).id(id).address("127.0.0.1").port(9100).payload(new Info("java", 7))
                            .build();
            String last = null;
            try (org.apache.curator.x.discovery.ServiceDiscovery<Object> d =
                    org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Object.class)
                            .client(client).basePath(base).build()) {
                d.start();
                d.registerService(inst);
                System.out.println("REGISTERED " + id);
                System.out.flush();
                try (org.apache.curator.x.discovery.ServiceProvider<Object> p =
                        d.serviceProviderBuilder().serviceName(service).build()) {
                    p.start();
                    while (!Files.exists(stop)) {
                        if (System.nanoTime() - deadline > 0) {
                            throw new IllegalStateException("stop file " + stop + " did not appear within " + timeoutMs + "ms");
                        }
                        TreeMap<String, String> view = new TreeMap<>();
                        for (org.apache.curator.x.discovery.ServiceInstance<Object> i : p.getAllInstances()) {
                            view.put(i.getId(), String.valueOf(i.getPayload()));
                        }
                        StringBuilder b = new StringBuilder();
                        for (Map.Entry<String, String> e : view.entrySet()) {
                            if (b.length() > 0) {
                                b.append(',');
                            }
                            b.append(e.getKey()).append('=').append(e.getValue());
                        }
                        if (!b.toString().equals(last)) {
                            last = b.toString();
                            System.out.println("PROVIDER " + last);
                            System.out.flush();
                        }
                        Thread.sleep(10);
                    }
                }
                d.unregisterService(inst);
            }
        }

        static void query(CuratorFramework client, String base, String service, Path stop, long timeoutMs) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            String last = null;
            try (org.apache.curator.x.discovery.ServiceDiscovery<Object> d =
                    org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Object.class)
                            .client(client).basePath(base).build()) {
                d.start();
                try (org.apache.curator.x.discovery.ServiceCache<Object> cache =
                        d.serviceCacheBuilder().name(service).build()) {
                    cache.start();
                    while (!Files.exists(stop)) {
                        if (System.nanoTime() - deadline > 0) {
                            throw new IllegalStateException("stop file " + stop + " did not appear within " + timeoutMs + "ms");
                        }
                        TreeMap<String, String> view = new TreeMap<>();
                        for (org.apache.curator.x.discovery.ServiceInstance<Object> i : cache.getInstances()) {
                            view.put(i.getId(), i.getPayload() + "@" + i.getAddress() + ":" + i.getPort());
                        }
                        StringBuilder b = new StringBuilder();
                        for (Map.Entry<String, String> e : view.entrySet()) {
                            if (b.length() > 0) {
                                b.append(',');
                            }
                            b.append(e.getKey()).append('=').append(e.getValue());
                        }
                        if (!b.toString().equals(last)) {
                            last = b.toString();
                            System.out.println("INSTANCES " + last);
                            System.out.flush();
                        }
                        Thread.sleep(10);
                    }
                }
            }
        }
    }

    /**
     * The node recipes: persistent-node keeps an ephemeral PersistentNode
     * (no protection) at path, persistent-ttl-node a PersistentTtlNode of
     * --ttl-ms, both with the data "id". Each prints "READY id" and
     * "SESSION <session id in hex> <its password in hex>" once connected, starts the node,
     * prints "CREATED" once its first create (or its write of an existing
     * node) is done, then, every 10 ms until the stop file exists: when the
     * file DIR/data holds something new, sets the node's data to it and
     * prints "SET <data>"; when what its client reads at path changes,
     * prints "SEES <ephemeral owner in hex> <data>" ("SEES none" while
     * there is no node). Then it closes the node and prints "DONE id".
     */
    static final class Nodes {
        static final java.util.Set<String> NAMES = new java.util.HashSet<>(java.util.Arrays.asList(
                "persistent-node", "persistent-ttl-node"));

        static int run(Map<String, String> opts, String connect, String path, String recipe, String id, Path marker,
                int sessionTimeoutMs, int acquireTimeoutMs) throws Exception {
            if (!opts.containsKey("stop-file")) {
                throw new UsageException("--stop-file is required with --recipe " + recipe);
            }
            if (recipe.equals("persistent-ttl-node") && !opts.containsKey("ttl-ms")) {
                throw new UsageException("--ttl-ms is required with --recipe persistent-ttl-node");
            }
            Path stop = Paths.get(opts.get("stop-file"));
            byte[] initial = id.getBytes(StandardCharsets.UTF_8);
            CuratorFramework client = newClient(connect, sessionTimeoutMs);
            try {
                ready(client, opts, connect, id, acquireTimeoutMs);
                org.apache.zookeeper.ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
                StringBuilder passwd = new StringBuilder();
                for (byte b : zk.getSessionPasswd()) {
                    passwd.append(String.format("%02x", b));
                }
                System.out.println("SESSION " + Long.toHexString(zk.getSessionId()) + " " + passwd);
                System.out.flush();
                PersistentNode node = null;
                PersistentTtlNode ttl = null;
                if (recipe.equals("persistent-node")) {
                    node = new PersistentNode(client, org.apache.zookeeper.CreateMode.EPHEMERAL, false, path, initial);
                    node.start();
                } else {
                    ttl = new PersistentTtlNode(client, path, intOpt(opts, "ttl-ms", 2), initial);
                    ttl.start();
                }
                boolean created = node != null ? node.waitForInitialCreate(acquireTimeoutMs, TimeUnit.MILLISECONDS)
                        : ttl.waitForInitialCreate(acquireTimeoutMs, TimeUnit.MILLISECONDS);
                if (!created) {
                    throw new IllegalStateException("node " + path + " not created within " + acquireTimeoutMs + "ms");
                }
                System.out.println("CREATED");
                System.out.flush();
                follow(client, path, node, ttl, marker.resolve("data"), stop, acquireTimeoutMs);
                if (node != null) {
                    node.close();
                } else {
                    ttl.close();
                }
            } finally {
                client.close();
            }
            System.out.println("DONE " + id);
            System.out.flush();
            return EXIT_OK;
        }

        static void follow(CuratorFramework client, String path, PersistentNode node, PersistentTtlNode ttl, Path dataFile,
                Path stop, long timeoutMs) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            String applied = null;
            String seen = null;
            while (!Files.exists(stop)) {
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException("stop file " + stop + " did not appear within " + timeoutMs + "ms");
                }
                if (Files.exists(dataFile)) {
                    String want = new String(Files.readAllBytes(dataFile), StandardCharsets.UTF_8);
                    if (!want.equals(applied)) {
                        byte[] b = want.getBytes(StandardCharsets.UTF_8);
                        if (node != null) {
                            node.setData(b);
                        } else {
                            ttl.setData(b);
                        }
                        applied = want;
                        System.out.println("SET " + want);
                        System.out.flush();
                    }
                }
                String view;
                try {
                    org.apache.zookeeper.data.Stat st = new org.apache.zookeeper.data.Stat();
                    byte[] d = client.getData().storingStatIn(st).forPath(path);
                    view = Long.toHexString(st.getEphemeralOwner()) + " " + new String(d, StandardCharsets.UTF_8);
                } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
                    view = "none";
                } catch (org.apache.zookeeper.KeeperException.ConnectionLossException e) {
                    view = seen; // not connected: nothing new seen
                }
                if (view != null && !view.equals(seen)) {
                    seen = view;
                    System.out.println("SEES " + view);
                    System.out.flush();
                }
                Thread.sleep(10);
            }
        }
    }
}
