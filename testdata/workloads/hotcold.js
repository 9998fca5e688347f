// jitprof's container workload: hot and cold share the CPU 3:1 in every slice of time, for SECONDS (first argument, 3 by default); prints its truth, the CPU time each had (process.cpuUsage, in ns), as JSON.
function hot(n) { let a = 0; for (let i = 0; i < n; i++) a = (a + i * 7) % 1000003; return a; }
function cold(n) { let a = 0; for (let i = 0; i < n; i++) a = (a + i * 13) % 1000033; return a; }
const cpu = { hot: 0, cold: 0 };
let sink = 0;
function timed(name, f, n) {
  const start = process.cpuUsage();
  sink += f(n);
  const d = process.cpuUsage(start);
  cpu[name] += (d.user + d.system) * 1000;
}
const end = Date.now() + 1000 * Number(process.argv[2] || 3);
while (Date.now() < end) { timed('hot', hot, 300000); timed('cold', cold, 100000); }
console.log(JSON.stringify(cpu));
if (sink < 0) console.log(sink);
