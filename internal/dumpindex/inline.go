package dumpindex

// InlineFrame is one method instance inlined at an address.
type InlineFrame struct {
	Name string
	File string // "" when the runtime gave none
	Line uint32 // 0 when the instance's line table does not cover the address
	// Inferred is set when the runtime wrote no inline record for the
	// frame and jitprof worked it out from source positions (V8: see
	// v8.go); such a frame can be wrong where its function's extent is.
	Inferred bool
}

// InlineChain returns the method instances inlined at addr in fn's code,
// outermost first: the one inlined into fn, the one inlined into that, down
// to the innermost, whose code addr is. fn's own frame is not included: its
// name is fn.Name and its line at addr (from Lines) is that of the outermost
// inlined call. Each frame's line is its own table's at addr, so every frame
// but the innermost names the line of the call inlined below it.
//
// addr is at fn's load address (CodeAddr), as for Lines, whatever moves
// followed. Without inline records for addr the chain is empty (nil), at no
// cost beyond a scan of fn.Inlines().
//
// V8 writes no inline records: for its optimized code the chain is the
// function whose source holds the position DEBUG_INFO gives addr, when that
// is not fn, as one Inferred frame (see v8.go).
func (fn *Code) InlineChain(addr uint64) []InlineFrame {
	inlines := fn.Inlines()
	if len(inlines) == 0 {
		return fn.v8Chain(addr)
	}
	var chain []InlineFrame
	// The tree is walked by parent ids from the function's own id; siblings
	// do not overlap, so at most one child of each level holds addr. The
	// depth bound stops a cycle of ids in a corrupt dump.
	parent := inlines[0].RootID
	for range inlines {
		found := false
		for _, in := range inlines {
			if in.ParentID != parent || in.MethodID == parent || !in.Contains(addr) {
				continue
			}
			line, _ := in.LineAt(addr)
			chain = append(chain, InlineFrame{Name: in.Name, File: in.File, Line: line})
			parent, found = in.MethodID, true
			break
		}
		if !found {
			break
		}
	}
	return chain
}
