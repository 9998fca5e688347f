// jitprof agent's node workload: busy for argv[2] milliseconds (default
// 1000) in two functions V8 compiles, hotA doing about twice hotB's work.
function hotA(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i * 3 + 1); return s; }
function hotB(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i * 5 + 2); return s; }
const end = Date.now() + Number(process.argv[2] || 1000);
let total = 0;
while (Date.now() < end) { total += hotA(200000); total += hotB(100000); }
console.log(total > 0);
