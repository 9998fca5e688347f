package perfprof

// nameInterpreted renames the frames of HotSpot's interpreter among ids,
// the locations of the user frames the unwinder walked (ids[i] is frame
// i's), as the Java methods they run, which each frame holds
// (symbolize.Space.Interpreted). stack is the sample's copy of its stack
// from sp. A frame whose method no record names stays the interpreter's.
func (a *aggregator) nameInterpreted(ids []uint32, t, sp uint64, stack []byte) {
	for i, id := range ids {
		if a.flags(id)&interpreter == 0 {
			continue
		}
		if fr, ok := a.space.Interpreted(a.frame(id-1), t, a.unwinder.fps[i], sp, stack); ok {
			ids[i] = a.intern(fr, a.loc(id).whole)
		}
	}
}

// interpreterName is the name HotSpot gives its interpreter's code, as
// agents write it.
const interpreterName = "Interpreter"
