package perfdata

import "fmt"

// The encoders below make the feature sections a recorder writes so that
// perf report --header shows the machine, and jitprof report can tell a
// recording of the running kernel (FeatureOSRelease). They lay the data out
// as perf's util/header.c write_* functions do.

// StringFeatureOf returns a feature section holding one string, such as
// FeatureHostname, FeatureOSRelease, FeatureVersion or FeatureArch, as
// StringFeature reads it.
func StringFeatureOf(id FeatureID, s string) Feature {
	return Feature{ID: id, Data: appendHeaderString(nil, s)}
}

// NrCPUsFeature returns the FeatureNrCPUs section: the CPUs the machine has
// and those online.
func NrCPUsFeature(avail, online uint32) Feature {
	return Feature{ID: FeatureNrCPUs, Data: appendU32s(nil, avail, online)}
}

// ClockDataFeature returns the FeatureClockData section, as ClockData
// reads it.
func ClockDataFeature(cd ClockData) Feature {
	b := appendU32s(nil, 1, uint32(cd.ClockID))
	return Feature{ID: FeatureClockData, Data: appendU64s(b, cd.WallNs, cd.ClockNs)}
}

// SampleTimeFeature returns the FeatureSampleTime section: when the first
// and the last sample were taken, as SampleTime reads it.
func SampleTimeFeature(first, last uint64) Feature {
	return Feature{ID: FeatureSampleTime, Data: appendU64s(nil, first, last)}
}

// CmdlineFeature returns the FeatureCmdline section: the recorder's
// command line, one string per argument.
func CmdlineFeature(args []string) Feature {
	b := le.AppendUint32(nil, uint32(len(args)))
	for _, a := range args {
		b = appendHeaderString(b, a)
	}
	return Feature{ID: FeatureCmdline, Data: b}
}

// EventDescFeature returns the FeatureEventDesc section naming each of
// attrs (names[i] names attrs[i]) with its ids, as EventDescs reads it.
func EventDescFeature(attrs []*Attr, names []string) (Feature, error) {
	if len(attrs) != len(names) {
		return Feature{}, fmt.Errorf("perfdata: %d events but %d names", len(attrs), len(names))
	}
	size := 0
	for _, a := range attrs {
		size = max(size, a.encodedLen())
	}
	b := appendU32s(nil, uint32(len(attrs)), uint32(size))
	for i, a := range attrs {
		var err error
		if b, err = appendAttr(b, a, size); err != nil {
			return Feature{}, fmt.Errorf("perfdata: event %q: %w", names[i], err)
		}
		b = le.AppendUint32(b, uint32(len(a.IDs)))
		b = appendHeaderString(b, names[i])
		b = appendU64s(b, a.IDs...)
	}
	return Feature{ID: FeatureEventDesc, Data: b}, nil
}

// appendHeaderString appends a perf_header_string: its length, then the
// string NUL-terminated and padded with NULs to 64 bytes, as perf's
// do_write_string pads it.
func appendHeaderString(b []byte, s string) []byte {
	n := (len(s) + nameAlign) &^ (nameAlign - 1)
	b = le.AppendUint32(b, uint32(n))
	b = append(b, s...)
	return append(b, make([]byte, n-len(s))...)
}
