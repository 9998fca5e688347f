import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Busy works for the given milliseconds of its own thread's CPU time
 * (default 1500), so that a busy machine stretches the run instead of
 * shortening the work, and prints as JSON what a test needs to hold samples
 * to: its thread's id, the CLOCK_MONOTONIC nanoseconds at which its work
 * began and ended, and the CPU time the kernel gave the thread in between.
 */
public class Busy {
    static long fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    public static void main(String[] args) throws Exception {
        long budget = (args.length > 0 ? Long.parseLong(args[0]) : 1500) * 1_000_000L;
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        // /proc/thread-self links to PID/task/TID.
        String tid = Files.readSymbolicLink(Path.of("/proc/thread-self")).getFileName().toString();
        long start = System.nanoTime();
        long cpu0 = threads.getCurrentThreadCpuTime(), cpu = cpu0;
        long sum = 0;
        while (cpu - cpu0 < budget) {
            sum += fib(22);
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < 100; i++) {
                sb.append(i);
            }
            sum += sb.length();
            cpu = threads.getCurrentThreadCpuTime();
        }
        long end = System.nanoTime();
        System.out.printf("{\"tid\": %s, \"start_ns\": %d, \"end_ns\": %d, \"cpu_ns\": %d, \"sum\": %d}%n",
                tid, start, end, cpu - cpu0, sum);
    }
}
