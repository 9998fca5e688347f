//go:build embedagents

package agents

import "embed"

// The libraries `make build` copies into lib/ before building with the
// embedagents tag.
//
//go:embed lib/libjitprof-jvmti.so lib/libjitprof-ittjit.so
var libs embed.FS

func embedded(name string) []byte {
	data, err := libs.ReadFile("lib/" + name)
	if err != nil {
		return nil
	}
	return data
}
