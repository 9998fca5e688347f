// jitprof's WebAssembly workload: a module of N functions built here, byte
// by byte, with a name section; function i loops (i+1)*SCALE times per call.
// It prints its own truth, each function's share of the CPU time spent in
// the calls (process.cpuUsage, not the wall clock, which a loaded machine's
// preemptions skew), as JSON: {"wfun0": 4.8, ...}.
const n = Number(process.argv[2] || 6);
const seconds = Number(process.argv[3] || 2);
const SCALE = 1000000; // a call of a few ms: the call's own cost is lost in it

const uleb = (v) => { const o = []; do { let b = v & 0x7f; v >>>= 7; if (v) b |= 0x80; o.push(b); } while (v); return o; };
const sleb = (v) => { const o = []; for (;;) { const b = v & 0x7f; v >>= 7; if ((v === 0 && !(b & 0x40)) || (v === -1 && (b & 0x40))) { o.push(b); return o; } o.push(b | 0x80); } };
const str = (s) => { const b = Buffer.from(s); return [...uleb(b.length), ...b]; };
const section = (id, body) => [id, ...uleb(body.length), ...body];

// (func (param $x i32) (result i32) (local $acc i32)
//   loop  acc += x * K; x -= 1; br_if x != 0  end  acc)
const body = (k) => [1, 1, 0x7f, 0x03, 0x40, 0x20, 1, 0x20, 0, 0x41, ...sleb(k), 0x6c, 0x6a, 0x21, 1,
  0x20, 0, 0x41, 1, 0x6b, 0x22, 0, 0x0d, 0, 0x0b, 0x20, 1, 0x0b];
const codes = [], exports = [], names = [];
for (let i = 0; i < n; i++) {
  const b = body(i + 3);
  codes.push(...uleb(b.length), ...b);
  exports.push(...str('f' + i), 0, ...uleb(i));
  names.push(...uleb(i), ...str('wfun' + i));
}
const fnNames = [...uleb(n), ...names];
const bin = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
  ...section(1, [1, 0x60, 1, 0x7f, 1, 0x7f]),
  ...section(3, [...uleb(n), ...Array(n).fill(0)]),
  ...section(7, [...uleb(n), ...exports]),
  ...section(10, [...uleb(n), ...codes]),
  ...section(0, [...str('name'), 1, ...uleb(fnNames.length), ...fnNames])]);
const fns = new WebAssembly.Instance(new WebAssembly.Module(bin)).exports;

const calls = [];
for (let i = 0; i < n; i++) calls.push(fns['f' + i]);
// It runs for seconds of CPU time in the calls, however loaded the
// machine: a profile of it then holds about as many samples anywhere.
const spent = new Array(n).fill(0);
let sink = 0, used = 0;
for (let round = 0; used < seconds * 1e6; round++) {
  for (let i = 0; i < n; i++) {
    const before = process.cpuUsage();
    sink += calls[i]((i + 1) * SCALE);
    const cpu = process.cpuUsage(before);
    used += cpu.user + cpu.system;
    // The first rounds compile and tier up: not the functions' own time.
    if (round >= 2) spent[i] += cpu.user + cpu.system;
  }
}
const total = spent.reduce((a, b) => a + b, 0);
const truth = {};
for (let i = 0; i < n; i++) truth['wfun' + i] = Math.round(1e5 * spent[i] / total) / 1e3;
console.log(JSON.stringify(truth));
if (sink === 42) console.log('');
