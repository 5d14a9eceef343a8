package agent

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestCEnumsMatchRecordingpb holds the C constants that the writer casts to
// recordingpb enums (memcap.h) equal to the values recording.proto gives
// the same names, and every value of those enums named by a C constant
// (KIND_UNSPECIFIED and POINT_UNSPECIFIED aside: the C side never writes 0
// there), so a value added on one side alone fails here.
func TestCEnumsMatchRecordingpb(t *testing.T) {
	covered := map[protoreflect.FullName]bool{}
	enums := map[protoreflect.FullName]protoreflect.EnumDescriptor{}
	for _, v := range cEnumValues() {
		enums[v.enum.FullName()] = v.enum
		pv := v.enum.Values().ByName(v.name)
		if pv == nil {
			t.Errorf("%s has no value %s (the C constant is %d)", v.enum.FullName(), v.name, v.c)
			continue
		}
		if int64(pv.Number()) != v.c {
			t.Errorf("%s = %d in recording.proto, %d in C", pv.FullName(), pv.Number(), v.c)
		}
		if covered[pv.FullName()] {
			t.Errorf("%s is named twice", pv.FullName())
		}
		covered[pv.FullName()] = true
	}
	if len(enums) != 3 {
		t.Errorf("%d enums checked, want 3", len(enums))
	}
	for _, e := range enums {
		for i := range e.Values().Len() {
			pv := e.Values().Get(i)
			if !covered[pv.FullName()] && pv.Number() != 0 {
				t.Errorf("%s (%d) has no C constant in memcap.h", pv.FullName(), pv.Number())
			}
		}
	}
}
