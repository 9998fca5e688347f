package record

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// onlineCPUs lists the CPUs the kernel runs: an event per CPU samples them.
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("listing CPUs: %w", err)
	}
	cpus, err := parseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("/sys/devices/system/cpu/online: %w", err)
	}
	return cpus, nil
}

// possibleCPUs is how many CPUs the machine may bring online, at least
// online.
func possibleCPUs(online int) int {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return online
	}
	cpus, err := parseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return online
	}
	return max(online, len(cpus))
}

// maxCPUs bounds a CPU list, so that a corrupt one cannot allocate without
// end; Linux supports at most 8192.
const maxCPUs = 8192

// parseCPUList reads the kernel's CPU list format: "0-3,5,7-8".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		last := first
		if err == nil && isRange {
			last, err = strconv.Atoi(hi)
		}
		if err != nil || first < 0 || last < first || last >= maxCPUs {
			return nil, fmt.Errorf("CPU list %q: bad entry %q", s, part)
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
		if len(cpus) > maxCPUs {
			return nil, fmt.Errorf("CPU list %q: more than %d CPUs", s, maxCPUs)
		}
	}
	return cpus, nil
}
