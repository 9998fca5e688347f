// jitprof's Java workload: a recursive method HotSpot compiles, and string building, for a given number of milliseconds (default 1500).
public class Work {
    static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

    public static void main(String[] args) throws Exception {
        long deadline = System.currentTimeMillis() + (args.length > 0 ? Long.parseLong(args[0]) : 1500);
        long sum = 0;
        while (System.currentTimeMillis() < deadline) {
            sum += fib(22);
            StringBuilder text = new StringBuilder();
            for (int i = 0; i < 100; i++) text.append(i);
            sum += text.length();
        }
        System.out.println(sum);
    }
}
