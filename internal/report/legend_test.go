package report

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// foreignKernel is a JIT's profile read where the kernel's symbols are not
// at hand (recorded on another kernel): its kernel frames are unresolved
// addresses in [kernel.kallsyms], as are its native frames in the
// program's own file, which is not at hand either.
func foreignKernel() *profile.Profile {
	const program = "/tmp/demo/minijit"
	return newProfBuilder().
		add("minijit", 7, 60, 60_000_000, program+":?", jit+":driver", jit+":loop_b").
		add("minijit", 7, 25, 25_000_000, program+":?", jit+":loop_a").
		add("minijit", 7, 6, 9_000_000, program+":?", jit+":loop_a", kernel+":?", kernel+":?").
		add("minijit", 7, 5, 5_000_000, program+":?", kernel+":?").
		add("minijit", 7, 4, 1_000_000, program+":?", program+":?").
		p
}

// legendShares returns the share, in percent, of each kind of frame in the
// page of p, as flame.js's legend counts them: each node's own value (less
// its children's) to its frame's kind, over the root's.
func legendShares(t *testing.T, p *profile.Profile, o Options) map[byte]float64 {
	t.Helper()
	_, d := htmlPage(t, p, o)
	root := d.tree(t, 0)
	values := make(map[byte]int64)
	var walk func(n *pageNode)
	walk = func(n *pageNode) {
		self := n.value
		for _, c := range n.children {
			self -= c.value
			walk(c)
		}
		values[d.Kind[n.frame]] += self
	}
	walk(root)
	shares := make(map[byte]float64)
	for k, v := range values {
		shares[k] = 100 * float64(v) / float64(root.value)
	}
	return shares
}

// textKernelShares returns the shares, in percent, the text report gives the
// kernel ([kernel.kallsyms], named or not) and the unnamed addresses
// outside it ([unknown] in any other module).
func textKernelShares(t *testing.T, p *profile.Profile, o Options) (kernelShare, unknownShare float64) {
	t.Helper()
	o.Sort = []string{"module", "symbol"}
	r := decode(t, p, o)
	for _, e := range r.Entries {
		share := 100 * float64(e.Self) / float64(r.Total)
		switch {
		case e.Module == kernel:
			kernelShare += share
		case e.Symbol == unknown:
			unknownShare += share
		}
	}
	return kernelShare, unknownShare
}

// TestLegendSharesMatchText: the flame graph's legend gives the kernel the
// share the text report gives [kernel.kallsyms], and "unknown" the share of
// the unnamed addresses in user space, whether the kernel's frames are
// named or not (a recording read on another kernel: the legend said kernel
// 0.00% where the text said 3.43%), counted by samples or weighed by period.
func TestLegendSharesMatchText(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    func() *profile.Profile
		o    Options
		// The kernel's share, as the test's profile was built.
		kernel float64
	}{
		{"kernel named", processes, Options{}, 6},
		{"kernel named, by period", processes, Options{Value: 1}, 600 / 111.4},
		{"kernel unnamed", foreignKernel, Options{}, 11},
		{"kernel unnamed, by period", foreignKernel, Options{Value: 1}, 14},
		{"kernel unnamed, by command", foreignKernel, Options{CommRoot: true}, 11},
	} {
		t.Run(tt.name, func(t *testing.T) {
			legend := legendShares(t, tt.p(), tt.o)
			kernelShare, unknownShare := textKernelShares(t, tt.p(), tt.o)
			if math.Abs(kernelShare-tt.kernel) > 1e-9 {
				t.Fatalf("the text report gives the kernel %.2f%%, want %.2f%%", kernelShare, tt.kernel)
			}
			if math.Abs(legend['k']-kernelShare) > 1e-9 || math.Abs(legend['u']-unknownShare) > 1e-9 {
				t.Errorf("the legend says kernel %.2f%%, unknown %.2f%%; the text report %.2f%% in %s, %.2f%% %s elsewhere",
					legend['k'], legend['u'], kernelShare, kernel, unknownShare, unknown)
			}
			var sum float64
			for _, s := range legend {
				sum += s
			}
			if math.Abs(sum-100) > 1e-9 {
				t.Errorf("the kinds' shares %v add up to %.2f%%", legend, sum)
			}
		})
	}
}

// TestLegendBrowser reads the legend as Chromium draws it, for a profile
// whose kernel frames are unnamed, and finds the text report's shares in it
// within rounding.
func TestLegendBrowser(t *testing.T) {
	c := startChromium(t, fixtures.LookPath(t, "chromium"))
	c.call("Page.enable", nil, nil)
	c.call("Runtime.enable", nil, nil)
	c.open(foreignKernel(), Options{})
	var legend string
	c.eval("document.getElementById('legend').textContent", &legend)
	kernelShare, unknownShare := textKernelShares(t, foreignKernel(), Options{})
	for label, want := range map[string]float64{"kernel": kernelShare, "unknown": unknownShare} {
		m := regexp.MustCompile(label + ` ([0-9.]+)%`).FindStringSubmatch(legend)
		if m == nil {
			t.Errorf("the legend %q gives no share to %s", legend, label)
			continue
		}
		got, err := strconv.ParseFloat(m[1], 64)
		if err != nil || math.Abs(got-want) > 0.005 {
			t.Errorf("the legend %q gives %s %s%%, the text report %s", legend, label, m[1], fmt.Sprintf("%.2f%%", want))
		}
	}
	if thrown := c.exceptions(); len(thrown) > 0 {
		t.Errorf("the page threw %s", thrown)
	}
}
