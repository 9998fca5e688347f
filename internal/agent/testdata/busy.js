// jitprof agent's node workload: busy for argv[2] milliseconds (default
// 1000) in two functions V8 compiles, hotA doing about twice hotB's work.
// With argv[3] "cpu", milliseconds of the process's CPU time in the loop
// rather than of the clock: a short program on a machine with no core to
// spare then still reaches its hot functions, where by the clock it could
// spend its whole time starting up.
function hotA(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i * 3 + 1); return s; }
function hotB(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i * 5 + 2); return s; }
const budget = Number(process.argv[2] || 1000);
const cpu = process.argv[3] === 'cpu';
const began = cpu ? process.cpuUsage() : Date.now();
const spent = cpu ? () => { const u = process.cpuUsage(began); return (u.user + u.system) / 1000; } : () => Date.now() - began;
let total = 0;
while (spent() < budget) { total += hotA(200000); total += hotB(100000); }
console.log(total > 0);
