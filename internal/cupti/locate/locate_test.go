package locate_test

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/cupti/locate"
	"github.com/gpurr/gpurr/internal/cupti/locate/locatetest"
)

// tree is a fake machine: CUPTI libraries under a temporary root.
type tree struct {
	t    *testing.T
	root string
	env  map[string]string
	// sites are python3's site-packages; nil makes asking python3 fail.
	sites []string
	asked bool
}

func newTree(t *testing.T) *tree {
	return &tree{t: t, root: t.TempDir(), env: map[string]string{}}
}

// path maps a fake absolute path into the tree.
func (tr *tree) path(p string) string { return filepath.Join(tr.root, p) }

// cupti puts a valid CUPTI library at p.
func (tr *tree) cupti(p string) string {
	full := tr.path(p)
	locatetest.Write(tr.t, full, locatetest.Library{Soname: filepath.Base(p), Exports: []string{"cuptiSubscribe", "cuptiGetVersion"}})
	return full
}

func (tr *tree) config(flag string, all bool) locate.Config {
	return locate.Config{
		Flag:   flag,
		Getenv: func(k string) string { return tr.env[k] },
		Dirs:   []string{tr.path("/usr/local/cuda/lib64"), tr.path("/usr/local/cuda/extras/CUPTI/lib64")},
		SitePackages: func() (string, []string, error) {
			tr.asked = true
			if tr.sites == nil {
				return "", nil, errors.New("no python3 on $PATH")
			}
			return "/usr/bin/python3", tr.sites, nil
		},
		All: all,
	}
}

func sources(r locate.Result) []string {
	var s []string
	for _, p := range r.Looked {
		s = append(s, p.Source)
	}
	return s
}

func TestSearchOrder(t *testing.T) {
	// Every place holds a CUPTI; removing the winner each round must hand
	// the search to the next place in the documented order.
	tr := newTree(t)
	tr.env["CUDA_HOME"] = tr.path("/opt/cuda")
	site := tr.path("/venv/lib/python3.12/site-packages")
	tr.sites = []string{site}
	flag := tr.cupti("/flag/libcupti.so.13")
	env := tr.cupti("/env/libcupti.so.13")
	order := []string{
		flag,
		env,
		tr.cupti("/opt/cuda/lib64/libcupti.so.13"),
		tr.cupti("/usr/local/cuda/lib64/libcupti.so.13"),
		tr.cupti("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"),
		tr.cupti("/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13"),
		tr.cupti("/venv/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12"),
	}
	for i, want := range order {
		f := ""
		if i == 0 {
			f = flag
		}
		if i <= 1 {
			tr.env[locate.EnvCUPTI] = env
		} else {
			delete(tr.env, locate.EnvCUPTI)
		}
		r := locate.Search(tr.config(f, false))
		if r.Path != want {
			t.Fatalf("round %d: found %q, want %q (looked: %v)", i, r.Path, want, sources(r))
		}
		if err := r.Err(); err != nil {
			t.Fatalf("round %d: Err() = %v", i, err)
		}
		if i >= 2 {
			os.Remove(want)
		}
	}
	os.Remove(order[len(order)-1])
	r := locate.Search(tr.config("", false))
	if r.Path != "" || r.Err() == nil {
		t.Fatalf("empty tree: found %q, err %v", r.Path, r.Err())
	}
}

func TestSourcesReportEveryPlace(t *testing.T) {
	tr := newTree(t)
	site := tr.path("/site-packages")
	os.MkdirAll(site, 0o755)
	tr.sites = []string{site}
	r := locate.Search(tr.config("", false))
	want := []string{
		"$CUDA_HOME/lib64",
		tr.path("/usr/local/cuda/lib64"),
		tr.path("/usr/local/cuda/extras/CUPTI/lib64"),
		"site-packages of /usr/bin/python3",
		"site-packages of /usr/bin/python3",
	}
	if got := sources(r); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("looked at %q\nwant        %q", got, want)
	}
	if r.Looked[3].Path != filepath.Join(site, "nvidia/cu13/lib") || r.Looked[4].Path != filepath.Join(site, "nvidia/cuda_cupti/lib") {
		t.Errorf("site-packages places: %q, %q", r.Looked[3].Path, r.Looked[4].Path)
	}
	msg := r.Err().Error()
	for _, s := range []string{"CUPTI not found", "$CUDA_HOME/lib64", "site-packages of /usr/bin/python3"} {
		if !strings.Contains(msg, s) {
			t.Errorf("Err() = %q, lacks %q", msg, s)
		}
	}
	if r.Looked[0].Err == nil || !strings.Contains(r.Looked[0].Err.Error(), "CUDA_HOME is not set") {
		t.Errorf("$CUDA_HOME place error = %v", r.Looked[0].Err)
	}
}

func TestPythonAskedOnlyWhenNeeded(t *testing.T) {
	tr := newTree(t)
	tr.sites = []string{}
	tr.cupti("/usr/local/cuda/lib64/libcupti.so.13")
	locate.Search(tr.config("", false))
	if tr.asked {
		t.Error("python3 was asked although /usr/local/cuda/lib64 had CUPTI")
	}
	r := locate.Search(tr.config("", true))
	if !tr.asked {
		t.Error("All: python3 was not asked")
	}
	if r.Path != tr.path("/usr/local/cuda/lib64/libcupti.so.13") {
		t.Errorf("All changed the answer to %q", r.Path)
	}
	if p, ok := r.Found(); !ok || p.Source != tr.path("/usr/local/cuda/lib64") || p.Soname != "libcupti.so.13" {
		t.Errorf("Found() = %+v, %v", p, ok)
	}
}

func TestPythonFailureIsAPlace(t *testing.T) {
	tr := newTree(t) // sites nil: asking fails
	r := locate.Search(tr.config("", false))
	last := r.Looked[len(r.Looked)-1]
	if last.Source != "site-packages of python3" || last.Err == nil || !strings.Contains(last.Err.Error(), "no python3") {
		t.Errorf("last place = %+v", last)
	}
}

func TestExplicitIsTheOnlyAnswer(t *testing.T) {
	tr := newTree(t)
	tr.cupti("/usr/local/cuda/lib64/libcupti.so.13")

	r := locate.Search(tr.config(tr.path("/nowhere/libcupti.so.13"), false))
	if r.Path != "" || len(r.Looked) != 1 || !r.Explicit {
		t.Fatalf("bad --cupti: found %q after %v", r.Path, sources(r))
	}
	if msg := r.Err().Error(); !strings.Contains(msg, "--cupti") || !strings.Contains(msg, "does not exist") {
		t.Errorf("Err() = %q", msg)
	}

	tr.env[locate.EnvCUPTI] = tr.path("/usr/local/cuda/lib64/libcupti.so.13")
	r = locate.Search(tr.config(tr.path("/nowhere"), false))
	if r.Path != "" || r.Looked[0].Source != "--cupti" {
		t.Errorf("--cupti must win over $GPURR_CUPTI: %+v", r)
	}

	// A directory names the library inside it.
	r = locate.Search(tr.config(tr.path("/usr/local/cuda/lib64"), false))
	if r.Path != tr.path("/usr/local/cuda/lib64/libcupti.so.13") {
		t.Errorf("--cupti DIR: found %q", r.Path)
	}

	tr.env[locate.EnvCUPTI] = tr.path("/empty")
	os.MkdirAll(tr.path("/empty"), 0o755)
	r = locate.Search(tr.config("", false))
	if r.Path != "" || !strings.Contains(r.Err().Error(), "$GPURR_CUPTI") {
		t.Errorf("bad $GPURR_CUPTI: %+v, %v", r, r.Err())
	}
}

func TestNamePreferenceInADirectory(t *testing.T) {
	tr := newTree(t)
	tr.cupti("/usr/local/cuda/lib64/libcupti.so")
	tr.cupti("/usr/local/cuda/lib64/libcupti.so.12")
	r := locate.Search(tr.config("", false))
	if filepath.Base(r.Path) != "libcupti.so.12" {
		t.Errorf("found %q, want libcupti.so.12 before libcupti.so", r.Path)
	}
	tr.cupti("/usr/local/cuda/lib64/libcupti.so.13")
	if r := locate.Search(tr.config("", false)); filepath.Base(r.Path) != "libcupti.so.13" {
		t.Errorf("found %q, want libcupti.so.13 first", r.Path)
	}
}

func TestInvalidLibrariesAreSkipped(t *testing.T) {
	tr := newTree(t)
	os.MkdirAll(tr.path("/usr/local/cuda/lib64"), 0o755)
	os.WriteFile(tr.path("/usr/local/cuda/lib64/libcupti.so.13"), []byte("not elf"), 0o644)
	good := tr.cupti("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13")
	r := locate.Search(tr.config("", false))
	if r.Path != good {
		t.Fatalf("found %q, want %q", r.Path, good)
	}
	if err := r.Looked[1].Err; err == nil || !strings.Contains(err.Error(), "not an ELF file") {
		t.Errorf("bad file's error = %v", err)
	}
}

func TestCheckLibrary(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lib locatetest.Library) string {
		p := filepath.Join(dir, name)
		locatetest.Write(t, p, lib)
		return p
	}
	other := elf.EM_AARCH64
	if elf.EM_AARCH64 == machineOf(t, write("probe", locatetest.Library{})) {
		other = elf.EM_X86_64
	}
	cases := []struct {
		name    string
		lib     locatetest.Library
		wantErr string
	}{
		{"ok", locatetest.Library{Soname: "libcupti.so.13", Exports: []string{"cuptiSubscribe"}}, ""},
		{"no-symbol", locatetest.Library{Exports: []string{"somethingElse"}}, "does not export cuptiSubscribe"},
		{"undefined-symbol", locatetest.Library{Imports: []string{"cuptiSubscribe"}}, "does not export cuptiSubscribe"},
		{"other-arch", locatetest.Library{Machine: other, Exports: []string{"cuptiSubscribe"}}, "built for"},
		{"executable", locatetest.Library{Type: elf.ET_EXEC, Exports: []string{"cuptiSubscribe"}}, "not a shared library"},
	}
	for _, c := range cases {
		soname, err := locate.CheckLibrary(write(c.name, c.lib), "cuptiSubscribe")
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: err = %v, want %q", c.name, err, c.wantErr)
		case c.wantErr == "" && soname != c.lib.Soname:
			t.Errorf("%s: soname %q", c.name, soname)
		}
	}
	if _, err := locate.CheckLibrary(filepath.Join(dir, "missing"), "x"); err == nil || err.Error() != "does not exist" {
		t.Errorf("missing file: %v", err)
	}
}

// --cupti naming a FIFO (or one put where a library is looked for) is refused at once: a plain
// open would wait for a writer forever.
func TestCheckLibraryRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "libcupti.so.13")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan locate.Result, 1)
	go func() { done <- locate.Search(locate.Config{Flag: fifo}) }()
	select {
	case r := <-done:
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Errorf("--cupti FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--cupti FIFO: the search still waits for a writer after 10s")
	}
}

// FuzzCheckLibrary: any file --cupti or $GPURR_CUPTI names is a library that exports the
// symbol (with its soname) or an error, never a panic.
func FuzzCheckLibrary(f *testing.F) {
	f.Add(locatetest.Bytes(locatetest.Library{Soname: "libcupti.so.13", Exports: []string{locate.CUPTISymbol}}))
	f.Add(locatetest.Bytes(locatetest.Library{Imports: []string{locate.CUPTISymbol}}))
	f.Add(locatetest.Bytes(locatetest.Library{Type: elf.ET_EXEC}))
	f.Add([]byte("\x7fELF"))
	path := filepath.Join(f.TempDir(), "libcupti.so.13")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		soname, err := locate.CheckLibrary(path, locate.CUPTISymbol)
		if err != nil && err.Error() == "" {
			t.Fatalf("an empty error (soname %q)", soname)
		}
	})
}

func machineOf(t *testing.T, path string) elf.Machine {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Machine
}

// TestRealMachine runs the real search, for the log; it asserts only that
// a found library passed the checks.
func TestRealMachine(t *testing.T) {
	r := locate.Search(locate.Config{All: true})
	for _, p := range r.Looked {
		t.Logf("%-40s %s: %v", p.Source, p.Path, p.Err)
	}
	if r.Path == "" {
		t.Logf("no CUPTI on this machine: %v", r.Err())
		return
	}
	if _, err := locate.CheckLibrary(r.Path, locate.CUPTISymbol); err != nil {
		t.Errorf("found %s but it fails the check: %v", r.Path, err)
	}
}

func TestDirectoriesLookedInOnce(t *testing.T) {
	tr := newTree(t)
	tr.env["CUDA_HOME"] = tr.path("/usr/local/cuda") // as it often is
	tr.sites = []string{tr.path("/missing-site")}
	r := locate.Search(tr.config("", true))
	n := 0
	for _, p := range r.Looked {
		if p.Path == tr.path("/usr/local/cuda/lib64") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("/usr/local/cuda/lib64 looked at %d times: %v", n, sources(r))
	}
	last := r.Looked[len(r.Looked)-1]
	if last.Path != tr.path("/missing-site") || len(r.Looked) != 3 {
		t.Errorf("a missing site-packages should be one place: %+v", r.Looked)
	}
}
