package symtab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The program and library the C tests build: each prints, for a static
// and an exported function, its address less its object's load bias
// (l_addr of its link map, what the agent records as a frame's offset).
const progC = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>

static __attribute__((noinline, noclone)) int static_helper(int x) { return x * 3 + 1; }
int lib_exported(int);
void *lib_static_address(void);

static void show(const char *name, void *fn) {
  Dl_info info;
  struct link_map *m;
  if (dladdr1(fn, &info, (void **)&m, RTLD_DL_LINKMAP))
    printf("%s %lx\n", name, (unsigned long)((uintptr_t)fn - m->l_addr));
}

int main(int argc, char **argv) {
  (void)argv;
  show("static_helper", (void *)static_helper);
  show("main", (void *)main);
  show("lib_exported", (void *)lib_exported);
  show("lib_static", lib_static_address());
  return static_helper(argc) + lib_exported(argc) == 0;
}
`

const libC = `static __attribute__((noinline, noclone)) int lib_static(int x) { return x ^ 5; }
int lib_exported(int x) { return lib_static(x) + 2; }
void *lib_static_address(void) { return (void *)lib_static; }
`

type builtObjects struct {
	exe, lib string
	offsets  map[string]uint64 // function name -> offset in its object
}

// build compiles the program (PIE or not) and its library, runs it and
// reads the offsets it prints.
func build(t *testing.T, pie bool) builtObjects {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the symbol table tests build a C program")
	}
	dir := t.TempDir()
	for name, src := range map[string]string{"prog.c": progC, "lib.c": libC} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := builtObjects{exe: filepath.Join(dir, "prog"), lib: filepath.Join(dir, "libnames.so")}
	pieFlag := "-pie"
	if !pie {
		pieFlag = "-no-pie"
	}
	for _, args := range [][]string{
		{"-O1", "-fPIC", "-shared", "-o", b.lib, filepath.Join(dir, "lib.c")},
		{"-O1", pieFlag, "-o", b.exe, filepath.Join(dir, "prog.c"), "-L" + dir, "-lnames", "-Wl,-rpath," + dir, "-ldl"},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(b.exe).Output()
	if err != nil {
		t.Fatalf("%s: %v", b.exe, err)
	}
	b.offsets = map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, hex, _ := strings.Cut(line, " ")
		off, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			t.Fatalf("%s printed %q", b.exe, line)
		}
		b.offsets[name] = off
	}
	if len(b.offsets) != 4 {
		t.Fatalf("%s printed %q, want 4 offsets", b.exe, out)
	}
	return b
}

// check looks up each function at its first byte and a few bytes in.
func check(t *testing.T, path string, offsets map[string]uint64, want map[string]string) {
	t.Helper()
	tab, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	for fn, name := range want {
		for _, in := range []uint64{0, 3} {
			if got := tab.Name(offsets[fn] + in); got != name {
				t.Errorf("%s: Name(%s+%d) = %q, want %q", filepath.Base(path), fn, in, got, name)
			}
		}
	}
}

func TestNamesStaticAndExportedCFunctions(t *testing.T) {
	for _, pie := range []bool{true, false} {
		t.Run("pie="+strconv.FormatBool(pie), func(t *testing.T) {
			b := build(t, pie)
			check(t, b.exe, b.offsets, map[string]string{"static_helper": "static_helper", "main": "main"})
			check(t, b.lib, b.offsets, map[string]string{"lib_static": "lib_static", "lib_exported": "lib_exported"})
		})
	}
}

// A stripped object has no .symtab: its static functions have no name,
// its exported ones keep theirs from .dynsym, and nothing fails.
func TestStrippedObjectsNameOnlyExportedFunctions(t *testing.T) {
	strip, err := exec.LookPath("strip")
	if err != nil {
		t.Skip("strip not found")
	}
	b := build(t, true)
	for _, path := range []string{b.exe, b.lib} {
		if out, err := exec.Command(strip, path).CombinedOutput(); err != nil {
			t.Fatalf("strip %s: %v\n%s", path, err, out)
		}
	}
	check(t, b.exe, b.offsets, map[string]string{"static_helper": "", "main": ""})
	check(t, b.lib, b.offsets, map[string]string{"lib_static": "", "lib_exported": "lib_exported"})
}

// A cgo program (built here: go test strips its own binary): a Go function
// and a static C function are both in its .symtab.
const cgoProgram = `package main

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>

static __attribute__((noinline, noclone)) int c_static(int x) { return x * 5 + 1; }
static uintptr_t c_static_address(void) { return (uintptr_t)c_static; }
static uintptr_t load_bias(void) {
  Dl_info info;
  struct link_map *m;
  return dladdr1((void *)c_static, &info, (void **)&m, RTLD_DL_LINKMAP) ? m->l_addr : 0;
}
*/
import "C"

import (
	"fmt"
	"reflect"
)

//go:noinline
func goFunction(x int) int { return x*7 + 3 }

func main() {
	bias := uintptr(C.load_bias())
	fmt.Printf("main.goFunction %x\n", reflect.ValueOf(goFunction).Pointer()-bias)
	fmt.Printf("c_static %x\n", uintptr(C.c_static_address())-bias)
}
`

func TestNamesGoAndCFunctionsOfCgoProgram(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH: the test builds a cgo program")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: cgo needs it")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "cgoprog")
	for name, text := range map[string]string{"main.go": cgoProgram, "go.mod": "module cgoprog\n\ngo 1.22\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command(goTool, "build", "-o", exe, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("%s: %v", exe, err)
	}
	offsets, want := map[string]uint64{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, hex, _ := strings.Cut(line, " ")
		off, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			t.Fatalf("%s printed %q", exe, line)
		}
		offsets[name], want[name] = off, name
	}
	if len(offsets) != 2 {
		t.Fatalf("%s printed %q, want 2 offsets", exe, out)
	}
	check(t, exe, offsets, want)
}

func TestCacheReportsAnUnreadableObjectOnce(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notELF, []byte("not an object"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := NewCache(4)
	defer c.Close()
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.so"), notELF} {
		if name, err := c.Name(path, 0x1000); name != "" || err == nil {
			t.Errorf("first Name in %s = %q, %v; want \"\" and an error", path, name, err)
		}
		if name, err := c.Name(path, 0x1000); name != "" || err != nil {
			t.Errorf("second Name in %s = %q, %v; want \"\" and no error", path, name, err)
		}
	}
}

// A cache of one table reopens objects as lookups alternate between them.
func TestCacheEvicts(t *testing.T) {
	b := build(t, true)
	c := NewCache(1)
	defer c.Close()
	for range 3 {
		for path, fn := range map[string]string{b.exe: "static_helper", b.lib: "lib_static"} {
			if name, err := c.Name(path, b.offsets[fn]+1); name != fn || err != nil {
				t.Fatalf("Name(%s, %s+1) = %q, %v", filepath.Base(path), fn, name, err)
			}
		}
	}
	if len(c.tables) != 1 {
		t.Errorf("the cache holds %d tables, want at most 1", len(c.tables))
	}
}
