package perfdata

import (
	"reflect"
	"testing"
)

// TestSampleReset: reset leaves no field of a sample set, whichever was,
// as assigning an empty Sample would; a field added to Sample and left out
// of reset fails it.
func TestSampleReset(t *testing.T) {
	h := RecordHeader{Offset: 8, Type: TypeSample, Misc: MiscUser, Raw: []byte{1}}
	want := Sample{RecordHeader: h}
	n := reflect.TypeFor[Sample]().NumField()
	for i := range n {
		if reflect.TypeFor[Sample]().Field(i).Name == "RecordHeader" {
			continue
		}
		var s Sample
		f := reflect.ValueOf(&s).Elem().Field(i)
		switch f.Kind() {
		case reflect.Uint64, reflect.Uint32:
			f.SetUint(1)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Struct: // Read
			f.Field(0).SetUint(1)
		default:
			t.Fatalf("field %s of kind %v: teach this test to set it", f.Type(), f.Kind())
		}
		s.reset(h)
		if !reflect.DeepEqual(s, want) {
			t.Errorf("reset leaves field %s set: %+v", reflect.TypeFor[Sample]().Field(i).Name, s)
		}
	}
}
