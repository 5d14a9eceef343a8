// Package locate finds the native libraries gpurr loads at run time: CUPTI
// here, and the agent through package agentpath, which shares its types.
//
// It is pure Go: a place is accepted when the file there is an ELF shared
// object for this machine's architecture that exports the expected symbol
// (debug/elf), without loading it. gpurr doctor adds a dlopen check through
// package cuda; gpurr record passes the path it finds to the agent in
// $GPURR_CUPTI.
//
// CUPTI is looked for, in this order:
//
//  1. the --cupti flag (a file, or a directory holding one), then
//  2. $GPURR_CUPTI (likewise); either one, when given, is the only answer:
//     a bad path named by the user is reported, not replaced by another,
//  3. $CUDA_HOME/lib64, /usr/local/cuda/lib64,
//     /usr/local/cuda/extras/CUPTI/lib64,
//  4. the site-packages folders of the python3 found on $PATH:
//     nvidia/cu13/lib (CUDA 13 wheels) and nvidia/cuda_cupti/lib (CUDA 12).
//
// In each directory the names in LibraryNames are tried in order.
package locate

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gpurr/gpurr/internal/regular"
)

// EnvCUPTI names the CUPTI library (or its directory) for gpurr; gpurr
// record passes the library it found to the agent in the same variable.
const EnvCUPTI = "GPURR_CUPTI"

// CUPTISymbol is exported by every CUPTI library; a file without it is not
// CUPTI.
const CUPTISymbol = "cuptiSubscribe"

// CUPTIFix says how to provide CUPTI.
const CUPTIFix = "install it (pip install nvidia-cuda-cupti, or the CUDA toolkit) or name it with --cupti PATH or $" + EnvCUPTI

// LibraryNames are the CUPTI file names tried in each directory, preferred
// first: CUDA 13's, then CUDA 12's, then the unversioned development link.
var LibraryNames = []string{"libcupti.so.13", "libcupti.so.12", "libcupti.so"}

// Place is one place looked at.
type Place struct {
	Source string // why it was looked at: "--cupti", "$GPURR_CUPTI", "$CUDA_HOME/lib64", ...
	Path   string // the file looked at; the directory when no file name matched there
	Soname string // the library's DT_SONAME, when it is valid
	Err    error  // nil when Path is a usable library; otherwise why not
}

// Result is the outcome of a search.
type Result struct {
	What   string  // what was looked for, for messages: "CUPTI"
	Path   string  // the library to use; "" when none was found
	Looked []Place // every place looked at, in search order
	// Explicit is set when the user named the library (flag or
	// environment): then Path is that library or nothing.
	Explicit bool
	// Fix says how to provide the library when none is found.
	Fix string
}

// Found returns the place Path came from.
func (r Result) Found() (Place, bool) {
	for _, p := range r.Looked {
		if p.Err == nil && p.Path == r.Path && r.Path != "" {
			return p, true
		}
	}
	return Place{}, false
}

// Err is nil when a library was found, and otherwise one line saying what
// is missing, where the search went and how to fix it.
func (r Result) Err() error {
	if r.Path != "" {
		return nil
	}
	if r.Explicit && len(r.Looked) > 0 {
		p := r.Looked[0]
		return fmt.Errorf("%s named by %s is not usable: %s: %v", r.What, p.Source, p.Path, p.Err)
	}
	var sources []string
	for _, p := range r.Looked {
		if !slices.Contains(sources, p.Source) {
			sources = append(sources, p.Source)
		}
	}
	msg := fmt.Sprintf("%s not found (looked in %s)", r.What, strings.Join(sources, ", "))
	if r.Fix != "" {
		msg += ": " + r.Fix
	}
	return errors.New(msg)
}

// Config says where to look for CUPTI; the zero value searches the
// standard places with the real environment.
type Config struct {
	// Flag is the --cupti value: a file or a directory; "" when not given.
	Flag string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// SitePackages lists the python3 site-packages directories and names
	// the interpreter; nil means asking the python3 found on $PATH.
	SitePackages func() (python string, dirs []string, err error)
	// Dirs are the standard directories looked in after $CUDA_HOME/lib64;
	// nil means StandardDirs.
	Dirs []string
	// All looks at every place even after a match, for a full report;
	// the result is the same.
	All bool
}

// StandardDirs are where CUDA toolkits put CUPTI, looked in after
// $CUDA_HOME/lib64.
var StandardDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64"}

// Find returns the CUPTI library to use, given the --cupti flag's value
// ("" when not given) and the real environment. The error is one line
// naming the places looked at.
func Find(flag string) (string, error) {
	r := Search(Config{Flag: flag})
	return r.Path, r.Err()
}

// Search looks for the CUPTI library as the package documentation says and
// reports every place it looked at.
func Search(cfg Config) Result {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	sitePackages := cfg.SitePackages
	if sitePackages == nil {
		sitePackages = PythonSitePackages
	}
	s := search{res: Result{What: "CUPTI", Fix: CUPTIFix}, all: cfg.All, symbol: CUPTISymbol}

	if cfg.Flag != "" {
		s.explicit("--cupti", cfg.Flag, LibraryNames)
		return s.res
	}
	if v := getenv(EnvCUPTI); v != "" {
		s.explicit("$"+EnvCUPTI, v, LibraryNames)
		return s.res
	}
	if home := getenv("CUDA_HOME"); home != "" {
		s.dir("$CUDA_HOME/lib64", filepath.Join(home, "lib64"), LibraryNames)
	} else {
		s.add(Place{Source: "$CUDA_HOME/lib64", Err: errors.New("CUDA_HOME is not set")})
	}
	dirs := cfg.Dirs
	if dirs == nil {
		dirs = StandardDirs
	}
	for _, d := range dirs {
		s.dir(d, d, LibraryNames)
	}
	if s.done() {
		return s.res
	}
	python, sites, err := sitePackages()
	source := "site-packages of python3"
	if python != "" {
		source = "site-packages of " + python
	}
	if err != nil {
		s.add(Place{Source: source, Err: err})
		return s.res
	}
	if len(sites) == 0 {
		s.add(Place{Source: source, Err: errors.New("python3 reports no site-packages directory")})
	}
	for _, site := range sites {
		if _, err := os.Stat(site); err != nil {
			// One line for a missing site-packages, not one per wheel.
			s.add(Place{Source: source, Path: site, Err: statError(err)})
			continue
		}
		for _, sub := range []string{"nvidia/cu13/lib", "nvidia/cuda_cupti/lib"} {
			s.dir(source, filepath.Join(site, sub), LibraryNames)
		}
	}
	return s.res
}

// search accumulates places, stopping at the first match unless all.
type search struct {
	res    Result
	all    bool
	symbol string
	seen   map[string]bool // directories looked in already
}

func (s *search) done() bool { return s.res.Path != "" && !s.all }

func (s *search) add(p Place) {
	s.res.Looked = append(s.res.Looked, p)
	if p.Err == nil && s.res.Path == "" {
		s.res.Path = p.Path
	}
}

// explicit looks only at a path the user gave.
func (s *search) explicit(source, path string, names []string) {
	s.res.Explicit = true
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		s.dir(source, path, names)
		return
	}
	s.file(source, path)
}

// dir looks for the first of names in directory d, unless it was looked
// in already ($CUDA_HOME is often /usr/local/cuda).
func (s *search) dir(source, d string, names []string) {
	d = filepath.Clean(d)
	if s.done() || s.seen[d] {
		return
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[d] = true
	st, err := os.Stat(d)
	switch {
	case err != nil:
		s.add(Place{Source: source, Path: d, Err: statError(err)})
		return
	case !st.IsDir():
		s.add(Place{Source: source, Path: d, Err: errors.New("not a directory")})
		return
	}
	for _, name := range names {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			s.file(source, p)
			return
		}
	}
	s.add(Place{Source: source, Path: d, Err: fmt.Errorf("no %s there", strings.Join(names, " or "))})
}

func (s *search) file(source, path string) {
	if s.done() {
		return
	}
	soname, err := CheckLibrary(path, s.symbol)
	s.add(Place{Source: source, Path: path, Soname: soname, Err: err})
}

func statError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("does not exist")
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// machines maps GOARCH to the ELF machine of its shared objects.
var machines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"ppc64le": elf.EM_PPC64,
}

// CheckLibrary reports whether path is a 64-bit ELF shared object for this
// machine's architecture that exports symbol (as a defined dynamic symbol),
// and returns its DT_SONAME. It reads the file; it does not load it. Only a
// regular file is read (internal/regular): a FIFO put where a library is
// looked for would otherwise hang the search until something wrote to it.
func CheckLibrary(path, symbol string) (soname string, err error) {
	file, err := regular.Open(path)
	if err != nil {
		return "", statError(err)
	}
	defer file.Close()
	f, err := elf.NewFile(file)
	if err != nil {
		return "", errors.New("not an ELF file")
	}
	if f.Class != elf.ELFCLASS64 {
		return "", fmt.Errorf("a %v library; gpurr needs 64-bit", f.Class)
	}
	if want, ok := machines[runtime.GOARCH]; ok && f.Machine != want {
		return "", fmt.Errorf("built for %v, this machine is %s", f.Machine, runtime.GOARCH)
	}
	if f.Type != elf.ET_DYN {
		return "", fmt.Errorf("not a shared library (ELF type %v)", f.Type)
	}
	if names, err := f.DynString(elf.DT_SONAME); err == nil && len(names) > 0 {
		soname = names[0]
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return soname, fmt.Errorf("cannot read its dynamic symbols: %v", err)
	}
	for _, sym := range syms {
		if sym.Name == symbol && sym.Section != elf.SHN_UNDEF {
			return soname, nil
		}
	}
	return soname, fmt.Errorf("does not export %s", symbol)
}

// pythonScript prints each site-packages directory python3 uses: the
// global ones, the user's, and any other on sys.path (a virtual
// environment's, $PYTHONPATH's), once each.
const pythonScript = `
import site, sys
dirs = []
try:
    dirs += site.getsitepackages()
except Exception:
    pass
try:
    dirs.append(site.getusersitepackages())
except Exception:
    pass
dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
seen = set()
for d in dirs:
    if d not in seen:
        seen.add(d)
        print(d)
`

// PythonSitePackages asks the python3 found on $PATH for its site-packages
// directories (waiting at most 10 seconds) and returns the interpreter's
// path with them.
func PythonSitePackages() (python string, dirs []string, err error) {
	python, err = exec.LookPath("python3")
	if err != nil {
		return "", nil, errors.New("no python3 on $PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", pythonScript).Output()
	if err != nil {
		return python, nil, fmt.Errorf("asking %s for its site-packages: %v", python, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			dirs = append(dirs, line)
		}
	}
	return python, dirs, nil
}
