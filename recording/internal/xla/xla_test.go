package xla

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readDump(t *testing.T) *Dump {
	t.Helper()
	d, err := Read(filepath.Join("testdata", "dump"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var stepKernels = []string{"gemm_fusion_dot_2", "loop_reduce_fusion", "gemm_fusion_dot_3", "loop_subtract_fusion",
	"input_reduce_fusion", "loop_multiply_fusion_1", "gemm_fusion_dot_1", "gemm_fusion_dot_general_8",
	"loop_multiply_fusion", "gemm_fusion_dot"}

func TestReadSkipsOtherFiles(t *testing.T) {
	d := readDump(t)
	if len(d.Modules) != 3 {
		t.Fatalf("%d modules, want 3 (the buffer assignment is not one)", len(d.Modules))
	}
}

func TestFindStepKernels(t *testing.T) {
	d := readDump(t)
	for _, tc := range []struct {
		kernel      string
		grid, block [3]uint32
		fusion, op  string
		text        string
	}{
		{"gemm_fusion_dot_2", [3]uint32{128, 1, 1}, [3]uint32{128, 1, 1}, "gemm_fusion_dot.2", "jit(step)/jvp()/dot_general",
			"/work/main/scratch/jax_mlp.py:14 loss_fn"},
		// tanh then dot_general: the root's line (19, the dot) first.
		{"gemm_fusion_dot_3", [3]uint32{32, 1, 1}, [3]uint32{128, 1, 1}, "gemm_fusion_dot.3", "jit(step)/jvp()/dot_general",
			"/work/main/scratch/jax_mlp.py:18 loss_fn +1 more"},
		// the update: sub and mul at line 27, the weight gradient's dot at 14.
		{"gemm_fusion_dot", [3]uint32{64, 1, 1}, [3]uint32{128, 1, 1}, "gemm_fusion_dot", "jit(step)/sub",
			"/work/main/scratch/jax_mlp.py:27 step.<locals>.<lambda> +1 more"},
		{"loop_subtract_fusion", [3]uint32{10, 1, 1}, [3]uint32{128, 1, 1}, "loop_subtract_fusion", "jit(step)/jvp()/sub",
			"/work/main/scratch/jax_mlp.py:19 loss_fn +1 more"},
	} {
		s, n, amb := d.Find(tc.kernel, stepKernels, tc.grid, tc.block)
		if s == nil || amb || n != 1 {
			t.Errorf("%s: site %v, %d candidates, ambiguous %v", tc.kernel, s, n, amb)
			continue
		}
		if s.Module != "jit_step" || s.Fusion != tc.fusion || s.OpName != tc.op || s.Text() != tc.text {
			t.Errorf("%s: %s %s %q %q, want jit_step %s %q %q", tc.kernel, s.Module, s.Fusion, s.OpName, s.Text(), tc.fusion, tc.op, tc.text)
		}
	}
}

// loop_multiply_fusion is a kernel of jit_step and of both jit_multiply
// modules; the launched module's kernel set, then the grid, tell them apart.
func TestFindDisambiguates(t *testing.T) {
	d := readDump(t)
	if n := len(d.Candidates("loop_multiply_fusion")); n != 3 {
		t.Fatalf("%d candidates, want 3", n)
	}
	s, _, _ := d.Find("loop_multiply_fusion", stepKernels, [3]uint32{}, [3]uint32{})
	if s == nil || s.Module != "jit_step" {
		t.Fatalf("by kernel set: %+v, want jit_step's", s)
	}
	one := []string{"loop_multiply_fusion"}
	s, n, amb := d.Find("loop_multiply_fusion", one, [3]uint32{40, 1, 1}, [3]uint32{128, 1, 1})
	if s == nil || amb || n != 1 || s.File != "module_4641.jit_multiply.sm_9.0a_gpu_after_optimizations.txt" || s.Text() != "/work/main/scratch/jax_mlp.py:11 init" {
		t.Fatalf("by grid: %+v (%d, %v)", s, n, amb)
	}
	// Without a grid that tells them apart, jit_step's site differs from
	// jit_multiply's: ambiguous, no site.
	s, n, amb = d.Find("loop_multiply_fusion", one, [3]uint32{7, 1, 1}, [3]uint32{128, 1, 1})
	if s != nil || !amb || n != 3 {
		t.Fatalf("unknown grid: %+v (%d, %v), want ambiguous among 3", s, n, amb)
	}
	// The two jit_multiply modules agree: not ambiguous.
	d2 := &Dump{byName: map[string][]*Site{}, mods: map[*Site]*Module{}}
	for _, m := range d.Modules {
		if m.Name == "jit_multiply" {
			d2.add(m)
		}
	}
	if s, n, amb := d2.Find("loop_multiply_fusion", one, [3]uint32{}, [3]uint32{}); s == nil || amb || n != 2 {
		t.Fatalf("agreeing modules: %+v (%d, %v)", s, n, amb)
	}
	if s, _, _ := d.Find("fusion", nil, [3]uint32{}, [3]uint32{}); s != nil {
		t.Fatalf("a kernel no module has: %+v", s)
	}
}

func TestReadBad(t *testing.T) {
	_, err := Read(filepath.Join("testdata", "bad"))
	if err == nil || !strings.Contains(err.Error(), "no HloModule header") {
		t.Fatalf("err = %v", err)
	}
	_, err = Read(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no *_gpu_after_optimizations.txt module") {
		t.Fatalf("empty dir: err = %v", err)
	}
}

// A multi-output fusion's root is a tuple: the lines of the results it
// writes come first, in the tuple's order.
func TestMultiOutputFusion(t *testing.T) {
	const text = `HloModule jit_f, is_scheduled=true

FileNames
1 "/p/f.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=2}
2 {file_name_id=1 function_name_id=1 line=11 end_line=11 column=1 end_column=2}
3 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}
3 {file_location_id=3 parent_frame_id=1}


%fused (p0: f32[4]) -> (f32[4], f32[4]) {
  %p0 = f32[4]{0} parameter(0)
  %a = f32[4]{0} exp(%p0), metadata={op_name="jit(f)/exp" stack_frame_id=1}
  %b = f32[4]{0} log(%a), metadata={op_name="jit(f)/log" stack_frame_id=2}
  %c = f32[4]{0} negate(%a), metadata={op_name="jit(f)/neg" stack_frame_id=3}
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%c, %b)
}

ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  ROOT %loop_log_fusion = (f32[4]{0}, f32[4]{0}) fusion(%x), kind=kLoop, calls=%fused, metadata={op_name="jit(f)/log" stack_frame_id=2}
}
`
	m, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Kernels["loop_log_fusion"]
	if s == nil || s.OpName != "jit(f)/neg" || s.Text() != "/p/f.py:12 f +2 more" || s.Lines[1].Line != 11 {
		t.Fatalf("%+v", s)
	}
}

func TestMetadata(t *testing.T) {
	op, frame := metadata(`op_name="p[\'w1\']" scheduling_name="x" stack_frame_id=12}, backend_config={}`)
	if op != `p['w1']` || frame != 12 {
		t.Fatalf("%q %d", op, frame)
	}
	if op, frame := metadata(`op_name="unterminated`); op != "" || frame != 0 {
		t.Fatalf("unterminated: %q %d", op, frame)
	}
}

func TestKeep(t *testing.T) {
	for name, want := range map[string]bool{
		"module_6630.jit_step.sm_9.0a_gpu_after_optimizations.txt":                   true,
		"module_6630.jit_step.thunk_sequence.txt":                                    true,
		"module_6630.jit_step.sm_9.0a_gpu_after_optimizations-buffer-assignment.txt": false,
		"module_6630.jit_step.before_optimizations.txt":                              false,
		"module_6630.jit_step.config.pbtxt":                                          false,
	} {
		if Keep(name) != want {
			t.Errorf("Keep(%s) = %v", name, !want)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "dump", "module_6630.jit_step.sm_9.0a_gpu_after_optimizations.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("HloModule m\n\nStackFrames\n1 {file_location_id=1}\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(strings.NewReader(s))
		if err == nil {
			for _, site := range m.Kernels {
				_ = site.Text()
			}
		}
	})
}
