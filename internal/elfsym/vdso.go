package elfsym

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// VDSO reads the symbols of the running kernel's vDSO, the same image in
// every process, from this process's own [vdso] mapping. perf report
// reads the copy perf record left in its build-id cache.
func VDSO() (*Table, error) {
	img, err := VDSOImage()
	if err != nil {
		return nil, err
	}
	return NewTable(bytes.NewReader(img), "[vdso]")
}

// VDSOImage returns the ELF image of the vDSO, which is mapped whole.
func VDSOImage() ([]byte, error) {
	start, end, err := vdsoRange()
	if err != nil {
		return nil, err
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	img := make([]byte, end-start)
	if _, err := mem.ReadAt(img, int64(start)); err != nil {
		return nil, fmt.Errorf("elfsym: reading [vdso]: %w", err)
	}
	return img, nil
}

// vdsoRange finds the [vdso] mapping in /proc/self/maps.
func vdsoRange() (start, end uint64, err error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasSuffix(line, " [vdso]") {
			continue
		}
		// 7ffc1b1f3000-7ffc1b1f5000 r-xp 00000000 00:00 0  [vdso]
		rng, _, _ := strings.Cut(line, " ")
		lo, hi, _ := strings.Cut(rng, "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start || end-start > 1<<24 {
			return 0, 0, fmt.Errorf("elfsym: bad [vdso] line in /proc/self/maps: %q", line)
		}
		return start, end, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, errors.New("elfsym: no [vdso] in /proc/self/maps")
}
