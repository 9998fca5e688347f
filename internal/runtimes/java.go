package runtimes

import "errors"

// Java is HotSpot, which describes its code through jitprof's JVMTI agent,
// writing to $JITDUMPDIR.
var Java = register(&Runtime{
	Name:        "java",
	Executables: []string{"java"},
	Env: []Var{
		{Name: "JAVA_TOOL_OPTIONS", Sep: " ", Value: agentPath(JVMTI, "-agentpath:"), Optional: true},
		// HotSpot's compiled code uses rbp as a general register, and
		// gives no unwind tables for it: call chains through it need
		// frame pointers, whatever the call graph's mode.
		{Name: "JAVA_TOOL_OPTIONS", Sep: " ", Value: func(c Context) ([]string, error) {
			if !c.CallGraph {
				return nil, nil
			}
			return []string{"-XX:+PreserveFramePointer"}, nil
		}},
	},
	Flag: "java -agentpath:<jitprof's libjitprof-jvmti.so>",
})

// agentPath returns the path of one of jitprof's agents, prefixed.
func agentPath(a Agent, prefix string) func(Context) ([]string, error) {
	return func(c Context) ([]string, error) {
		if c.Agent == nil {
			return nil, errors.New("no agents at hand")
		}
		path, err := c.Agent(a)
		if err != nil {
			return nil, err
		}
		return []string{prefix + path}, nil
	}
}
