//go:build !embedagents

package agents

// embedded has no libraries without the embedagents build tag.
func embedded(string) []byte { return nil }
