// jitprof's node workload at scale: thousands of distinct hot functions, each with an inner one, so V8's tiers load thousands of code objects.
const count = Number(process.argv[2] || 3000);
const generated = [];
for (let k = 0; k < count; k++) generated.push(new Function('x', `function inner${k}(y) { return (y * ${k + 1}) % 13; } let acc = 0; for (let j = 0; j < x; j++) acc += inner${k}(j); return acc + ${k};`));
let total = 0;
for (let round = 0; round < 300; round++) for (const g of generated) total += g(50);
console.log(total);
