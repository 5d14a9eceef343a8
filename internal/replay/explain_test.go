package replay

import (
	"os"
	"strings"
	"testing"
)

func TestExplainDiffers(t *testing.T) {
	src, err := os.ReadFile("../ptx/testdata/run_dependent.ptx")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kernel     string
		ptx        []byte
		repeatable bool
		want       string
	}{
		{"clocked", src, true, "the replay is repeatable but differs from the recording, and the kernel reads %clock64 (PTX line 36): its output depends on when it runs"},
		{"clocked", src, false, "two replays disagree with each other, and the kernel reads %clock64 (PTX line 36): its output depends on when it runs"},
		{"stamped", src, true, "the kernel reads %globaltimer (PTX line 23, in stamp): its output depends on when it runs"},
		{"placed", src, true, "the kernel reads %smid (PTX line 70), reads %warpid (PTX line 71): its output depends on where it runs (which SM and warp slot)"},
		{"heap", src, false, "the kernel calls malloc (PTX line 89): its output depends on what the device heap returns"},
		{"plain", src, true, whyDiffers},
		{"plain", src, false, whyNondeterministic},
		{"clocked", nil, true, whyDiffers + " (the recording has no PTX of its module, only machine code: whether it reads a clock is not known)"},
		{"clocked", []byte(".version 8.0\n.target sm_80\n.entry clocked( {"), true, whyDiffers + " (its module's PTX could not be read: "},
	} {
		got := ExplainDiffers(c.kernel, c.ptx, c.repeatable)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s (PTX %v, repeatable %v):\n%s\nwant it to hold\n%s", c.kernel, c.ptx != nil, c.repeatable, got, c.want)
		}
		if strings.Contains(got, "outside its regions") && strings.Contains(got, "PTX line") {
			t.Errorf("%s: blames memory outside the regions when the code says why: %s", c.kernel, got)
		}
	}
}
