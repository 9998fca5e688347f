package perfprof

// SkipCollections makes Run skip the collections that lower large
// profiles' peak memory, until the returned function restores them: a fuzz
// test's thousands of small analyses would spend most of their time in
// them.
func SkipCollections() (restore func()) {
	c, f := collect, freeOSMemory
	collect, freeOSMemory = func() {}, func() {}
	return func() { collect, freeOSMemory = c, f }
}
