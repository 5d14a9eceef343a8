// Package agentpath finds libgpurr.so, the agent that gpurr record names in
// CUDA_INJECTION64_PATH. It lives apart from the CUPTI search (package
// locate, whose Place and Result it returns) so that callers ask for "the
// agent" by name, and so that an installed layout can change in one place.
//
// The agent is looked for, in this order:
//
//  1. $GPURR_AGENT, when set: the only answer (a bad path is reported),
//  2. beside the gpurr executable (symbolic links resolved): the build
//     puts bin/gpurr and bin/libgpurr.so together,
//  3. <executable's directory>/../lib/gpurr/, for an installed layout
//     such as /usr/local/bin/gpurr with /usr/local/lib/gpurr/libgpurr.so.
//
// A file is accepted when it is an ELF shared object for this machine that
// exports InitializeInjection.
package agentpath

import (
	"os"
	"path/filepath"

	"github.com/gpurr/gpurr/internal/cupti/locate"
)

// FileName is the agent's file name.
const FileName = "libgpurr.so"

// EnvVar overrides the search with a path to the agent.
const EnvVar = "GPURR_AGENT"

// EntryPoint is the function the CUDA driver calls in an injection library.
const EntryPoint = "InitializeInjection"

// NVTXEntryPoint is the function NVTX calls in its tool (NVTX_INJECTION64_PATH).
const NVTXEntryPoint = "InitializeInjectionNvtx2"

// Fix says how to provide the agent.
const Fix = "build it with make (it belongs beside bin/gpurr) or name it with $" + EnvVar

// Find returns the path of the agent for the running gpurr executable, or
// a one-line error naming the places looked at.
func Find() (string, error) {
	r := Search()
	return r.Path, r.Err()
}

// Search looks for the agent of the running gpurr executable and reports
// every place it looked at.
func Search() locate.Result {
	exe, err := os.Executable()
	if err == nil {
		if resolved, rerr := filepath.EvalSymlinks(exe); rerr == nil {
			exe = resolved
		}
	}
	return SearchFor(exe, os.Getenv(EnvVar))
}

// SearchFor looks for the agent of the gpurr executable at exe, with
// override as the value of $GPURR_AGENT ("" when unset).
func SearchFor(exe, override string) locate.Result {
	res := locate.Result{What: "the gpurr agent (" + FileName + ")", Fix: Fix}
	check := func(source, path string) bool {
		soname, err := locate.CheckLibrary(path, EntryPoint)
		res.Looked = append(res.Looked, locate.Place{Source: source, Path: path, Soname: soname, Err: err})
		if err == nil {
			res.Path = path
		}
		return err == nil
	}
	if override != "" {
		res.Explicit = true
		check("$"+EnvVar, override)
		return res
	}
	dir := filepath.Dir(exe)
	if check("beside "+filepath.Base(exe), filepath.Join(dir, FileName)) {
		return res
	}
	check("installed layout", filepath.Join(dir, "..", "lib", "gpurr", FileName))
	return res
}
