package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"

	"github.com/jitprof/jitprof/internal/contract"
)

// JSON writes the entries that Text would print as one JSON object
// followed by a newline. The package documentation describes its schema.
func JSON(w io.Writer, p *contract.Profile, o Options) error {
	t, err := aggregate(p, o)
	if err != nil {
		return err
	}
	r := jsonReport{
		Event:   t.event,
		Type:    t.typ.Type,
		Unit:    t.typ.Unit,
		Samples: t.count,
		Total:   t.total,
		Mode:    "self",
		Entries: []jsonEntry{},
	}
	if t.children {
		r.Mode = "children"
	}
	for _, k := range t.keys {
		r.Sort = append(r.Sort, sortKeyNames[k])
	}
	// Entries are encoded one at a time into the object, whose encoding
	// ends with them, so that a million of them are never all held
	// encoded, nor as jsonEntry values.
	head, err := json.Marshal(r)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(bytes.TrimSuffix(head, []byte("]}")))
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	var je jsonEntry // one for all, which escapes to the encoder
	for i, e := range t.entries {
		je = jsonEntry{}
		f := &t.frames[e.frame]
		if t.by[byComm] || t.by[byPID] {
			je.Comm = t.comms[e.comm]
		}
		if t.by[byPID] {
			je.PID = &e.pid
		}
		if t.by[byModule] {
			je.Module = t.module(f)
		}
		if t.by[bySymbol] {
			je.Symbol = t.name(f)
			je.File = t.file(f)
		}
		je.Samples = e.samples
		je.Self = e.self
		if t.children {
			je.Children = &e.children
		}
		if e.root >= 0 {
			if t.outward {
				je.Callers = t.jsonNodes(e.root)
			} else {
				je.Callees = t.jsonNodes(e.root)
			}
		}
		b.Reset()
		if err := enc.Encode(&je); err != nil {
			return err
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

func (t *table) jsonNodes(n int32) []*jsonNode {
	first, end := t.graph.children(n)
	if first == end {
		return nil
	}
	nodes := make([]*jsonNode, 0, end-first)
	for c := first; c < end; c++ {
		gn := &t.graph.nodes[c]
		f := &t.frames[gn.frame]
		jn := &jsonNode{Symbol: t.name(f), Module: t.module(f), File: t.file(f), Value: gn.value}
		if t.outward {
			jn.Callers = t.jsonNodes(c)
		} else {
			jn.Callees = t.jsonNodes(c)
		}
		nodes = append(nodes, jn)
	}
	return nodes
}

type jsonReport struct {
	Event   string      `json:"event"`
	Type    string      `json:"type"`
	Unit    string      `json:"unit"`
	Samples int64       `json:"samples"`
	Total   int64       `json:"total"`
	Sort    []string    `json:"sort"`
	Mode    string      `json:"mode"`
	Entries []jsonEntry `json:"entries"`
}

type jsonEntry struct {
	Comm     string      `json:"comm,omitempty"`
	PID      *int64      `json:"pid,omitempty"` // pid 0 is the idle task's
	Module   string      `json:"module,omitempty"`
	Symbol   string      `json:"symbol,omitempty"`
	File     string      `json:"file,omitempty"`
	Samples  int64       `json:"samples"`
	Self     int64       `json:"self"`
	Children *int64      `json:"children,omitempty"`
	Callers  []*jsonNode `json:"callers,omitempty"`
	Callees  []*jsonNode `json:"callees,omitempty"`
}

type jsonNode struct {
	Symbol  string      `json:"symbol"`
	Module  string      `json:"module"`
	File    string      `json:"file,omitempty"`
	Value   int64       `json:"value"`
	Callers []*jsonNode `json:"callers,omitempty"`
	Callees []*jsonNode `json:"callees,omitempty"`
}
