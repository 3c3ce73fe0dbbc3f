// CuratorBench measures Apache Curator's InterProcessMutex in the lock
// benchmarks' contended loop (internal/bench's runLoop): N sessions, each
// locking and unlocking one path in a loop until a shared budget of
// acquisitions is used up.
//
// It lives for a whole benchmark, so that the JIT compiler's work carries
// over from one run to the next, as in a long-running service. It reads
// commands from stdin, one a line, and answers each with one line on
// stdout:
//
//	RUN <connect> <path> <contenders> <acquisitions> <session timeout ms>
//
// opens that many clients (one session each) to connect (HOST:PORT,...),
// waits until every one is connected, runs the loop on path, closes the
// clients and answers "RESULT <acquisitions> <elapsed ns>": the time of
// the loop alone, without the sessions' set-up, as the Go workloads
// measure theirs. A run that fails answers "ERROR <message>". It exits 0
// at the end of stdin.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench {
    public static void main(String[] argv) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null;) {
            String answer;
            try {
                answer = "RESULT " + run(line.trim().split(" "));
            } catch (Throwable e) {
                answer = "ERROR " + String.valueOf(e).replace('\n', ' ');
            }
            System.out.println(answer);
            System.out.flush();
        }
    }

    /** Carries out one RUN command and returns "<acquisitions> <elapsed ns>". */
    static String run(String[] cmd) throws Exception {
        if (cmd.length != 6 || !cmd[0].equals("RUN")) {
            throw new IllegalArgumentException("want RUN <connect> <path> <contenders> <acquisitions> <session timeout ms>, not " + String.join(" ", cmd));
        }
        String connect = cmd[1], path = cmd[2];
        int contenders = Integer.parseInt(cmd[3]);
        int acquisitions = Integer.parseInt(cmd[4]);
        int sessionTimeoutMs = Integer.parseInt(cmd[5]);
        if (contenders < 1 || acquisitions < 1) {
            throw new IllegalArgumentException("contenders and acquisitions must be at least 1");
        }
        List<CuratorFramework> clients = new ArrayList<>();
        try {
            for (int i = 0; i < contenders; i++) {
                CuratorFramework c = CuratorFrameworkFactory.builder()
                        .connectString(connect)
                        .sessionTimeoutMs(sessionTimeoutMs)
                        .connectionTimeoutMs(15000)
                        .retryPolicy(new ExponentialBackoffRetry(100, 10, 2000))
                        .build();
                clients.add(c);
                c.start();
            }
            List<InterProcessMutex> locks = new ArrayList<>();
            for (CuratorFramework c : clients) {
                if (!c.blockUntilConnected(60, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("could not connect to " + connect + " within 60s");
                }
                locks.add(new InterProcessMutex(c, path));
            }
            return acquisitions + " " + loop(locks, acquisitions);
        } finally {
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
    }

    /**
     * Has every lock's thread lock and unlock until n acquisitions are used
     * up, and returns the time that took in nanoseconds. Before the timed
     * part each lock is taken and released once, one after the other, as
     * the Go workloads do (internal/bench's runLoop): a session's first
     * acquisition on a new path also creates the path's parents.
     */
    static long loop(List<InterProcessMutex> locks, int n) throws Exception {
        for (InterProcessMutex m : locks) {
            if (!m.acquire(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no first acquisition within 120s");
            }
            m.release();
        }
        AtomicInteger budget = new AtomicInteger(n);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (InterProcessMutex m : locks) {
            threads.add(new Thread(() -> {
                try {
                    while (budget.decrementAndGet() >= 0 && failure.get() == null) {
                        if (!m.acquire(120, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("no acquisition within 120s");
                        }
                        m.release();
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        long start = System.nanoTime();
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        long elapsed = System.nanoTime() - start;
        if (failure.get() != null) {
            throw new Exception("lock loop: " + failure.get(), failure.get());
        }
        return elapsed;
    }
}
