package instrument

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurr/gpurr/internal/ptx"
)

// addPTXSeeds seeds a fuzz target with the PTX the repository holds: the reader's test modules
// and gpurr's own kernels.
func addPTXSeeds(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "ptx", "testdata", "*.ptx"))
	files = append(files, filepath.Join("..", "kernels", "ptx", "demo.ptx"))
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
}

// FuzzInject: on any module the PTX reader accepts, delays before every point of every kernel
// print as PTX that parses again, with each kernel's own instructions kept in order and one
// sleep per point.
func FuzzInject(f *testing.F) {
	addPTXSeeds(f)
	sel, err := ParseSelection("barrier,shared-load,shared-store,global-load,global-store,atomic,mbarrier,async-copy,fence")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := ptx.Parse(src)
		if err != nil {
			return
		}
		m.Target = []string{"sm_90"}
		type kernel struct {
			name   string
			own    []string
			points int
		}
		var ks []kernel
		for _, fn := range m.Functions() {
			if !fn.Entry || !fn.HasBody || m.Function(fn.Name) != fn {
				continue
			}
			var own []string
			for _, in := range fn.Instructions() {
				own = append(own, in.Name())
			}
			points := Points(fn, sel)
			if err := InjectDelays(m, fn.Name, points, Delay{Nanoseconds: 100, Fraction: 0.5, Placement: PerWarp}); err != nil {
				t.Fatalf("%s: %v", fn.Name, err)
			}
			ks = append(ks, kernel{fn.Name, own, len(points)})
		}
		again, err := ptx.Parse([]byte(m.String()))
		if err != nil {
			t.Fatalf("the instrumented module does not parse: %v", err)
		}
		for _, k := range ks {
			var kept []string
			sleeps := 0
			for _, in := range again.Function(k.name).Instructions() {
				switch {
				case in.Opcode == "nanosleep" && in.Guard == "%gpurr_p":
					sleeps++
				case !ours(in):
					kept = append(kept, in.Name())
				}
			}
			if sleeps != k.points || !slices.Equal(kept, k.own) {
				t.Fatalf("%s: %d sleeps for %d points; instructions kept: %v", k.name, sleeps, k.points, slices.Equal(kept, k.own))
			}
		}
	})
}

// FuzzLiveProbes: on any module the PTX reader accepts, live probes with counts in every kernel
// print as PTX that parses again, each kernel with its own instructions in order and one more
// parameter, the probes' own.
func FuzzLiveProbes(f *testing.F) {
	addPTXSeeds(f)
	count, err := ParseSelection("global-load,global-store,atomic")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := ptx.Parse(src)
		if err != nil {
			return
		}
		m.Target, m.Version, m.AddressSize = []string{"sm_90"}, "8.0", 64
		own := map[string][]string{}
		params := map[string]int{}
		for _, fn := range m.Functions() {
			if !fn.Entry || !fn.HasBody || m.Function(fn.Name) != fn {
				continue
			}
			for _, in := range fn.Instructions() {
				own[fn.Name] = append(own[fn.Name], in.Name())
			}
			params[fn.Name] = len(fn.Params)
			if _, err := InjectLiveProbes(m, fn.Name, count); err != nil {
				t.Fatalf("%s: %v", fn.Name, err)
			}
		}
		again, err := ptx.Parse([]byte(m.String()))
		if err != nil {
			t.Fatalf("the probed module does not parse: %v", err)
		}
		for name, want := range own {
			fn := again.Function(name)
			var kept []string
			for _, in := range fn.Instructions() {
				if !ours(in) {
					kept = append(kept, in.Name())
				}
			}
			if !slices.Equal(kept, want) || len(fn.Params) != params[name]+1 || fn.Params[params[name]].Name != ProbeParam {
				t.Fatalf("%s: instructions kept %v, %d params for %d", name, slices.Equal(kept, want), len(fn.Params), params[name])
			}
		}
	})
}
