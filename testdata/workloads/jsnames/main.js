// jitprof's workload for function names: a named function and a class's
// method and getter in a library whose path has dots, an arrow function, an
// anonymous function expression and an eval'd function, each hot for about
// the same time, and the top level's loop. Runs for argv[2] seconds (1).
const { flatMap, Checker } = require('./lib/ts.lib/_tsc.js');
const evald = eval('(function evaldSum(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 3; return s; })');
const square = (n) => { let s = 0; for (let i = 0; i < n; i++) s += (i * i) % 11; return s; };
const c = new Checker();
const items = Array.from({ length: 300 }, (_, i) => i);
let t = 0;
const end = Date.now() + 1000 * Number(process.argv[2] || 1);
while (Date.now() < end) {
  t += flatMap(items, (x) => [x, x * 2, x * 3]).length;
  t += c.check(3000);
  t += c.total;
  t += square(3000);
  t += evald(3000);
  t += [1, 2, 3].map(function (x) { let s = 0; for (let i = 0; i < 1000; i++) s += (x * i) % 5; return s; })[0];
}
console.log(t);
