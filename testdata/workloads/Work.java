// jitprof's Java workload: a recursive method HotSpot compiles, and string building, for a given number of milliseconds (default 1500).
// With a second argument "truth", it prints its own measure of where its time goes every 50 ms: the time in
// milliseconds (System.currentTimeMillis), the nanoseconds spent inside fib so far and the nanoseconds since it started.
public class Work {
    static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

    public static void main(String[] args) throws Exception {
        long deadline = System.currentTimeMillis() + (args.length > 0 ? Long.parseLong(args[0]) : 1500);
        boolean truth = args.length > 1 && args[1].equals("truth");
        long sum = 0, inFib = 0, start = System.nanoTime(), next = start;
        while (System.currentTimeMillis() < deadline) {
            long before = System.nanoTime();
            sum += fib(22);
            long after = System.nanoTime();
            inFib += after - before;
            StringBuilder text = new StringBuilder();
            for (int i = 0; i < 100; i++) text.append(i);
            sum += text.length();
            if (truth && after >= next) {
                System.out.println(System.currentTimeMillis() + " " + inFib + " " + (after - start));
                next += 50_000_000L;
            }
        }
        System.out.println(sum);
    }
}
