package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The fixture is a real cuBLAS module recorded on an H100 (CUDA 13.0): its
// ELF version fields hold NVIDIA's numbers, which debug/elf alone rejects.
func TestELFFunctionsReadsCubin(t *testing.T) {
	image, err := os.ReadFile(filepath.Join("testdata", "nvjet_sm90.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	got := elfFunctions(image)
	want := []string{"nvjet_sm90_hsh_64x24_64x16_2x4_h_bz_NNT"}
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
