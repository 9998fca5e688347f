// jitprof's node workload for inlining: hot functions that TurboFan inlines
// into one caller's loop. `node inlined.js MODE SECONDS`:
//
//  leaves: horner, mix and collatz do plain arithmetic in their own
//          (inlined) code, never in a C++ leaf.
//  calls:  find, scan and has spend their time in V8 builtins they call
//          (string and array searches), which keep frame pointers; the
//          caller's loop adds arithmetic of its own.
//
// V8's own sampler (--cpu-prof) resolves inlining only at return addresses:
// it names the inlined functions of `calls` but gives the time of `leaves`'
// inlined code to their caller (src/profiler/symbolizer.cc).
'use strict';

// Each leaf runs a long loop per call and is called few times, so its cost
// is the loop's, the same whether TurboFan inlines it or not (no call
// overhead or per-call setup to speak of), and the driver fixes each one's
// iterations: the shares of a run with inlining off are those of this run.
// Every loop is a chain of dependent multiplications (imul, a fixed
// latency) with a few ALU steps and no data-dependent branch: it runs at
// about one instruction a cycle, so neither the front end (the code's
// alignment differs between compiles, and between inlined and not) nor
// another process on the machine changes the functions' relative costs,
// as short loops, floating point and branches did here. The counts come
// in as arguments, so no inlined loop sees a constant bound the function
// alone would not.
function horner(x, n) {
  let y = 0;
  for (let k = 0; k < n; k++) {
    y = (Math.imul(y, x) + k) | 0;
    y = (Math.imul(y, x) + 3) | 0;
    y = (Math.imul(y, x) + 5) | 0;
  }
  return y;
}

function mix(h, n) {
  for (let k = 0; k < n; k++) {
    h = Math.imul(h ^ k, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h;
}

// collatz takes 3c+1 for odd c and c/2 for even, without a branch.
function collatz(c, n) {
  let steps = 0;
  for (let k = 0; k < n; k++) {
    c = (Math.imul(c & 1, Math.imul(c, 5) + 2) + c) >> 1;
    c = (Math.imul(c & 1, Math.imul(c, 5) + 2) + c) >> 1;
    steps += c & 3;
  }
  return steps;
}

function runLeaves(rounds, plan) {
  let acc = 0, h = 7, c = 0, own = 1;
  for (let i = 0; i < rounds; i++) {
    acc = (acc + horner(i | 1, plan[0])) | 0;
    h = mix(h, plan[1]);
    c = (c + collatz(i * 7919 + 1, plan[2])) | 0;
    for (let k = 0; k < plan[3]; k++) own = (Math.imul(Math.imul(own, 31) ^ k, 17) + 1) | 0;
  }
  return acc + h + c + own;
}

const text = 'abcdefghij'.repeat(40) + 'xyz';
const numbers = Array.from({ length: 300 }, (_, k) => k * 7);

function find(i) {
  return text.indexOf('xyz', i & 15);
}

function scan(i) {
  return numbers.indexOf(2093 - (i & 1) * 7);
}

function has(i) {
  return numbers.includes(1400 + (i & 3)) ? 1 : 0;
}

function runCalls(rounds) {
  let t = 0, own = 1;
  for (let i = 0; i < rounds; i++) {
    t += find(i) + scan(i) + has(i);
    for (let k = 0; k < 4; k++) own = (own * 31 + i) % 1000003;
  }
  return t + own;
}

// Iterations per round of horner, mix, collatz and runLeaves' own loop.
const plan = [2400, 1800, 1300, 1600];
const calls = process.argv[2] === 'calls';
const end = Date.now() + Number(process.argv[3] || 2) * 1000;
let total = 0, rounds = 0;
while (Date.now() < end) {
  total += calls ? runCalls(20000) : runLeaves(200, plan);
  rounds++;
}
console.log(rounds, total);
