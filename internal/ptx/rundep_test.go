package ptx

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// dependsLine states, in testdata/run_dependent.ptx, what RunDependent finds in a kernel:
//
//	// depends KERNEL [WHAT LINE [FUNCTION]]
var dependsLine = regexp.MustCompile(`(?m)^// depends (.*)$`)

func TestRunDependent(t *testing.T) {
	src, m := loadFile(t, "testdata/run_dependent.ptx")
	want := map[string][]RunDependence{}
	for _, w := range dependsLine.FindAllStringSubmatch(string(src), -1) {
		f := strings.Fields(w[1])
		if len(f) < 3 {
			want[f[0]] = nil // a kernel that has none
			continue
		}
		line, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("depends line %q: %v", w[0], err)
		}
		d := RunDependence{What: f[1], Line: line}
		if len(f) > 3 {
			d.Function = f[3]
		}
		want[f[0]] = append(want[f[0]], d)
	}
	if len(want) != 5 {
		t.Fatalf("%d kernels with depends lines, want 5", len(want))
	}
	for kernel, w := range want {
		got := m.RunDependent(kernel)
		if len(got) != len(w) {
			t.Errorf("%s: %v, want %v", kernel, got, w)
			continue
		}
		for i := range w {
			if got[i] != w[i] {
				t.Errorf("%s: %v, want %v", kernel, got[i], w[i])
			}
		}
	}
	if got := m.RunDependent("no_such_kernel"); got != nil {
		t.Errorf("an unknown kernel: %v", got)
	}
}

func TestRunDependenceString(t *testing.T) {
	for _, c := range []struct {
		d    RunDependence
		want string
	}{
		{RunDependence{What: "%clock64", Line: 36}, "reads %clock64 (PTX line 36)"},
		{RunDependence{What: "%globaltimer", Line: 23, Function: "stamp"}, "reads %globaltimer (PTX line 23, in stamp)"},
		{RunDependence{What: "malloc", Line: 89}, "calls malloc (PTX line 89)"},
	} {
		if got := c.d.String(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.d, got, c.want)
		}
	}
}

// The kernels gpurr ships read no clock: nothing they compute depends on the run.
func TestRunDependentOwnKernels(t *testing.T) {
	m := parseFile(t, demoPTX)
	for _, f := range m.Functions() {
		if f.Entry {
			if got := m.RunDependent(f.Name); got != nil {
				t.Errorf("%s: %v", f.Name, got)
			}
		}
	}
}
