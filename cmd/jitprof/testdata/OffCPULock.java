import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.ReentrantLock;

/**
 * OffCPULock lock|monitor [MILLIS] runs threads that contend for MILLIS
 * (default 3000) on one ReentrantLock, which waitForLock takes, or on one
 * object's monitor, which waitForMonitor enters to call holdMonitor, and
 * prints each thread's truth on a line: "truth METHOD TID BLOCKED_S", TID
 * as the kernel numbers the thread, BLOCKED_S the seconds it spent off the
 * CPU in METHOD (holdMonitor's time apart): the time in it less the CPU
 * time the kernel gave the thread meanwhile, as a lock spins a little
 * before it parks, and a thread woken, or a thread waking another, may
 * wait for a CPU. Other threads contend first, briefly and often, so that
 * the JIT compiles the methods before the threads measured start: as a
 * service is when it is profiled, and as the JVMTI agent describes code
 * only after it ran (a frame in code compiled moments before may be
 * unnamed yet).
 */
public class OffCPULock {
    static final ReentrantLock LOCK = new ReentrantLock();
    static final Object MONITOR = new Object();
    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    // The clocks are read CPU time last at the start and first at the end,
    // so that a thread preempted in the CPU clock's system call is
    // preempted within the wall clock's span, as it is within the method.
    static long offCPUSince(long wall0, long cpu0) {
        long cpu = THREADS.getCurrentThreadCpuTime();
        return System.nanoTime() - wall0 - (cpu - cpu0);
    }

    static long spin(long ns) {
        long end = System.nanoTime() + ns, x = 0;
        while (System.nanoTime() < end) {
            x++;
        }
        return x;
    }

    /** Takes the lock, and adds the time off the CPU to blocked[0]. */
    static void waitForLock(long[] blocked) {
        long wall0 = System.nanoTime(), cpu0 = THREADS.getCurrentThreadCpuTime();
        LOCK.lock();
        blocked[0] += offCPUSince(wall0, cpu0);
    }

    /** Works holding the lock, then lets it go. */
    static long holdLock(long ns) {
        try {
            return spin(ns);
        } finally {
            LOCK.unlock();
        }
    }

    /**
     * Enters the monitor and works in it, and adds the time off the CPU to
     * blocked[0], but for holdMonitor's.
     */
    static long waitForMonitor(long ns, long[] blocked) {
        long wall0 = System.nanoTime(), cpu0 = THREADS.getCurrentThreadCpuTime();
        long[] held = {0};
        long sum;
        synchronized (MONITOR) {
            sum = holdMonitor(ns, held);
        }
        blocked[0] += offCPUSince(wall0, cpu0) - held[0];
        return sum;
    }

    /** Works, and puts the time it was off the CPU (preempted) in held[0]. */
    static long holdMonitor(long ns, long[] held) {
        long wall0 = System.nanoTime(), cpu0 = THREADS.getCurrentThreadCpuTime();
        long sum = spin(ns);
        held[0] = offCPUSince(wall0, cpu0);
        return sum;
    }

    /**
     * Runs n threads named NAME-i that contend iterations times or for
     * millis, each time holding the lock or monitor for holdNs, then working
     * alone for aloneNs, and returns their truths.
     */
    static String[] contend(boolean monitor, String name, long iterations, long millis, long holdNs, long aloneNs) throws InterruptedException {
        int n = 3;
        String[] lines = new String[n];
        Thread[] threads = new Thread[n];
        for (int i = 0; i < n; i++) {
            int me = i;
            // The name is the thread's comm: the JVM gives it to the
            // kernel when the thread starts.
            threads[i] = new Thread(() -> {
                long start = System.nanoTime(), sum = 0;
                long[] blocked = {0};
                try {
                    String tid = Files.readSymbolicLink(Path.of("/proc/thread-self")).getFileName().toString();
                    for (long k = 0; k < iterations && System.nanoTime() - start < millis * 1_000_000L; k++) {
                        if (monitor) {
                            sum += waitForMonitor(holdNs, blocked);
                        } else {
                            waitForLock(blocked);
                            sum += holdLock(holdNs);
                        }
                        sum += spin(aloneNs);
                    }
                    // The sum keeps the compiler from dropping the work.
                    lines[me] = String.format("truth %s %s %.6f (%d)", monitor ? "waitForMonitor" : "waitForLock", tid, blocked[0] / 1e9, sum);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, name + "-" + i);
        }
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        return lines;
    }

    public static void main(String[] args) throws Exception {
        boolean monitor = args[0].equals("monitor");
        long millis = args.length > 1 ? Long.parseLong(args[1]) : 3000;
        contend(monitor, "warmup", 10_000, 10_000, 5_000, 5_000);
        for (String line : contend(monitor, monitor ? "monitor" : "lock", Long.MAX_VALUE, millis, 2_000_000, 1_000_000)) {
            System.out.println(line);
        }
    }
}
