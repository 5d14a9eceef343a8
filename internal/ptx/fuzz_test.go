package ptx

import (
	"strings"
	"testing"
)

// FuzzParse holds Parse to its contract on any input: a module or a
// one-line *Error, never a panic; a module prints to text that parses back
// to an equal module; the write-set analysis runs to the end on it.
func FuzzParse(f *testing.F) {
	for _, file := range ptxFiles(f) {
		src, _ := loadFile(f, file)
		f.Add(src)
	}
	f.Add([]byte(".version 8.0\n.target sm_80\n.address_size 64\n.entry k()\n{\n\t{\n\t.reg .pred p;\n\t@p bra L;\nL:\n\t}\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := Parse(src)
		if err != nil {
			if _, ok := err.(*Error); !ok || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %T %q is not a one-line *Error", err, err)
			}
			return
		}
		if diff, err := roundTrip(m); err != nil || diff != "" {
			t.Fatalf("parse → print → parse: %v %s\n%s", err, diff, m.String())
		}
		for _, ws := range m.WriteSets() {
			for _, p := range ws.Params {
				if p.Verdict != ReadOnly && p.Verdict != MayWrite {
					t.Fatalf("%s %s: verdict %v", ws.Kernel, p.Name, p.Verdict)
				}
			}
		}
	})
}
