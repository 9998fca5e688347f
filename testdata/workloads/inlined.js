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

function horner(x) {
  let y = 0;
  for (let k = 0; k < 48; k++) y = y * x + k;
  return y;
}

function mix(h, v) {
  for (let k = 0; k < 20; k++) {
    h = Math.imul(h ^ v, 0x9e3779b1);
    h ^= h >>> 15;
  }
  return h;
}

function collatz(n) {
  let steps = 0;
  for (let k = 0; k < 12; k++) {
    n = (n & 1) ? (3 * n + 1) | 0 : n >>> 1;
    steps += n & 3;
  }
  return steps;
}

function runLeaves(rounds) {
  let acc = 0, h = 7, c = 0, own = 1;
  for (let i = 0; i < rounds; i++) {
    acc += horner((i & 1023) * 1e-3);
    h = mix(h, i);
    c += collatz(i | 1);
    for (let k = 0; k < 6; k++) own = (own * 31 + i) % 1000003;
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

const run = process.argv[2] === 'calls' ? runCalls : runLeaves;
const end = Date.now() + Number(process.argv[3] || 2) * 1000;
let total = 0, rounds = 0;
while (Date.now() < end) {
  total += run(20000);
  rounds++;
}
console.log(rounds, total);
