// jitprof's Java inlining workload: mapWork, the hot method, calls HashMap.put and Integer.toHexString, which C2 inlines into it, for a given number of milliseconds (default 3000).
import java.util.HashMap;

public class Inline {
    static int mapWork(HashMap<Integer, String> map, int base) {
        int sum = 0;
        for (int i = 0; i < 1000; i++) {
            int key = (base + i) * 0x9E3779B1;
            String hex = Integer.toHexString(key);
            map.put(key & 4095, hex);
            sum += hex.length();
        }
        return sum;
    }

    public static void main(String[] args) {
        long ms = args.length > 0 ? Long.parseLong(args[0]) : 3000;
        HashMap<Integer, String> map = new HashMap<>();
        long deadline = System.nanoTime() + ms * 1_000_000;
        long sum = 0;
        for (int base = 0; System.nanoTime() < deadline; base += 1000)
            sum += mapWork(map, base);
        System.out.println(sum);
    }
}
