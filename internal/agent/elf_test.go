package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The fixture is gpurr's demo kernels built by nvcc 13.0 for sm_90
// (scripts/gen-testdata): its ELF version fields hold NVIDIA's numbers,
// which debug/elf alone rejects.
func TestELFFunctionsReadsCubin(t *testing.T) {
	image, err := os.ReadFile(filepath.Join("testdata", "demo_sm90.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	got := elfFunctions(image)
	slices.Sort(got)
	want := []string{"gpurr_demo_fill", "gpurr_demo_reduce", "gpurr_demo_saxpy"}
	if !slices.Equal(got, want) {
		t.Fatalf("elfFunctions = %q, want %q", got, want)
	}
}

func TestELFFunctionsRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("short"), make([]byte, 4096)} {
		if got := elfFunctions(b); got != nil {
			t.Errorf("elfFunctions(%d bytes) = %q, want nil", len(b), got)
		}
	}
}
