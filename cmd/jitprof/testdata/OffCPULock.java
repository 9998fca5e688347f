import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.ReentrantLock;

/**
 * OffCPULock runs threads that contend on one lock for the given
 * milliseconds (default 3000), and prints each one's truth on a line:
 * "truth waitForLock TID BLOCKED_S", TID as the kernel numbers the thread,
 * BLOCKED_S the seconds it spent off the CPU while waitForLock took the
 * lock: the time in it less the CPU time the kernel gave the thread
 * meanwhile, as a lock spins a little before it parks, and a thread
 * woken may wait for a CPU.
 */
public class OffCPULock {
    static final ReentrantLock LOCK = new ReentrantLock();
    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    static long spin(long ns) {
        long end = System.nanoTime() + ns, x = 0;
        while (System.nanoTime() < end) {
            x++;
        }
        return x;
    }

    /** Takes the lock and returns the nanoseconds it was off the CPU meanwhile. */
    static long waitForLock() {
        long t0 = System.nanoTime(), cpu0 = THREADS.getCurrentThreadCpuTime();
        LOCK.lock();
        return System.nanoTime() - t0 - (THREADS.getCurrentThreadCpuTime() - cpu0);
    }

    /** Works holding the lock, then lets it go. */
    static long holdLock(long ns) {
        try {
            return spin(ns);
        } finally {
            LOCK.unlock();
        }
    }

    static long workAlone(long ns) {
        return spin(ns);
    }

    public static void main(String[] args) throws Exception {
        long millis = args.length > 0 ? Long.parseLong(args[0]) : 3000;
        int n = 3;
        String[] lines = new String[n];
        Thread[] threads = new Thread[n];
        for (int i = 0; i < n; i++) {
            int me = i;
            // The name is the thread's comm: the JVM gives it to the
            // kernel when the thread starts.
            threads[i] = new Thread(() -> {
                long start = System.nanoTime(), blocked = 0, sum = 0;
                try {
                    String tid = Files.readSymbolicLink(Path.of("/proc/thread-self")).getFileName().toString();
                    while (System.nanoTime() - start < millis * 1_000_000L) {
                        blocked += waitForLock();
                        sum += holdLock(2_000_000);
                        sum += workAlone(1_000_000);
                    }
                    // The sum keeps the compiler from dropping the work.
                    lines[me] = String.format("truth waitForLock %s %.6f (%d)", tid, blocked / 1e9, sum);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "lockwaiter-" + i);
        }
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        for (String line : lines) {
            System.out.println(line);
        }
    }
}
