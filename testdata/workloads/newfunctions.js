// jitprof's node workload: a recursive function, and generated ones that give V8 many functions to compile.
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
const count = Number(process.argv[2] || 50);
const generated = [];
for (let k = 0; k < count; k++) generated.push(new Function('x', `let acc = 0; for (let j = 0; j < x; j++) acc += (j * ${k + 1}) % 7; return acc + ${k};`));
let total = 0;
for (let round = 0; round < 2000; round++) for (const g of generated) total += g(100);
console.log(fib(27), total);
