<?php
// jitprof's PHP workload: recursion and a Mandelbrot set, for opcache's tracing JIT.
function fib($n) { return $n < 2 ? $n : fib($n - 1) + fib($n - 2); }
function mandel($size) {
    $total = 0;
    for ($y = 0; $y < $size; $y++) {
        for ($x = 0; $x < $size; $x++) {
            $re = 0.0; $im = 0.0;
            $cre = 2.0 * $x / $size - 1.5; $cim = 2.0 * $y / $size - 1.0;
            for ($i = 0; $i < 50 && $re * $re + $im * $im < 4; $i++) {
                $next = $re * $re - $im * $im + $cre;
                $im = 2 * $re * $im + $cim;
                $re = $next;
            }
            $total += $i;
        }
    }
    return $total;
}
// Three rounds, so that most of the run is in jitted code; one answer.
for ($round = 0; $round < 3; $round++) {
    $f = fib(25);
    $m = mandel(200);
}
echo $f, " ", $m, "\n";
