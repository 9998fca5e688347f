// Four hot methods with known shares of the work (40/30/20/10), for Mono
// under jitprof record and perf. Each runs the same loop, a share of the
// iterations each; none is inlined, so each sample lands in one of them.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;

static class Shares
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static ulong Alpha(ulong n, ulong x) { for (ulong i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL ^ (x >> 7); return x; }
    [MethodImpl(MethodImplOptions.NoInlining)]
    static ulong Beta(ulong n, ulong x) { for (ulong i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL ^ (x >> 7); return x; }
    [MethodImpl(MethodImplOptions.NoInlining)]
    static ulong Gamma(ulong n, ulong x) { for (ulong i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL ^ (x >> 7); return x; }
    [MethodImpl(MethodImplOptions.NoInlining)]
    static ulong Delta(ulong n, ulong x) { for (ulong i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL ^ (x >> 7); return x; }

    static void Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 2;
        const ulong unit = 100000;
        ulong x = 1;
        var clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            x = Alpha(4 * unit, x);
            x = Beta(3 * unit, x);
            x = Gamma(2 * unit, x);
            x = Delta(unit, x);
        }
        Console.WriteLine(x);
    }
}
