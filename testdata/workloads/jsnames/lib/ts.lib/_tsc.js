// A library in a directory with dots in its name, as node_modules often are:
// pprof cuts such paths at every dot when they are in a function's name.
function flatMap(items, f) {
  const out = [];
  for (const x of items) for (const y of f(x)) out.push(y);
  return out;
}
class Checker {
  constructor() { this.n = 0; }
  check(n) { let s = 0; for (let i = 0; i < n; i++) s += (i * 7) % 13; this.n += s; return s; }
  get total() { let s = this.n; for (let i = 0; i < 300; i++) s = (s * 31 + i) % 1000003; return s; }
}
module.exports = { flatMap, Checker };
