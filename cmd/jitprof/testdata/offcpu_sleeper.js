// Prints its own truth: the time its one blocking function slept, 30% of
// the loop's.
const cell = new Int32Array(new SharedArrayBuffer(4));
function spinner(ms) {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) x++;
  return x;
}
function sleeper(ms) {
  const t0 = process.hrtime.bigint();
  Atomics.wait(cell, 0, 0, ms);
  return process.hrtime.bigint() - t0;
}
let slept = 0n;
const start = performance.now();
while (performance.now() - start < 3000) {
  spinner(7);
  slept += sleeper(3);
}
console.log(`truth sleeper ${Number(slept) / 1e9}`);
