// Package instrument rewrites a kernel's PTX to run code of gpurr's at chosen instructions: the
// engine gpurr race injects delays with (and in-kernel probes will use). It works on
// internal/ptx's model of a module and changes only the kernel asked for; the result prints as
// PTX the driver JITs (cuModuleLoadDataEx), which replay then runs on the recorded inputs.
//
// Points picks instructions by class (barriers, shared or global loads and stores, atomics,
// mbarrier operations, asynchronous copies, fences) or by an opcode pattern. InjectDelays puts
// a scope block before each point that decides, from a seed, the point and the thread's place
// (per thread, per warp, per CTA, or one CTA of each cluster), whether to sleep there, and
// sleeps with nanosleep (sm_70 and newer). The seed is a module variable the runner sets before
// each launch, so one JIT serves every seed. The blocks store nothing: the kernel's write sets
// are unchanged (ptx.WriteSets).
//
// The JIT of instrumented modules and the delays' effect are checked on a GPU by gputest's
// race tests.
package instrument

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/gpurr/gpurr/internal/ptx"
)

// Class is a kind of instruction a point can be.
type Class string

const (
	Barrier     Class = "barrier"      // bar, barrier, bar.warp
	SharedLoad  Class = "shared-load"  // ld.shared
	SharedStore Class = "shared-store" // st.shared
	GlobalLoad  Class = "global-load"  // ld.global, and generic ld
	GlobalStore Class = "global-store" // st.global, and generic st
	Atomic      Class = "atomic"       // atom, red
	MBarrier    Class = "mbarrier"     // mbarrier.*
	AsyncCopy   Class = "async-copy"   // cp.async, cp.async.bulk (TMA), cp.reduce.async.bulk
	Fence       Class = "fence"        // fence, membar
)

// Classes lists every class, in the order ParseClasses names them.
var Classes = []Class{Barrier, SharedLoad, SharedStore, GlobalLoad, GlobalStore, Atomic, MBarrier, AsyncCopy, Fence}

// Selection is what Points picks: instructions of these classes, or whose name (opcode with its
// modifiers, "ld.global.nc.v4.f32") matches one of the patterns.
type Selection struct {
	Classes  []Class
	Patterns []*regexp.Regexp
}

// ParseSelection reads "barrier,global-store,op:^cp\.async" into a Selection.
func ParseSelection(list string) (Selection, error) {
	var s Selection
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if pat, ok := strings.CutPrefix(item, "op:"); ok {
			if pat == "" { // it would match every instruction
				return Selection{}, errors.New(`op: wants a regular expression of opcodes after it, such as op:^ld\.global`)
			}
			re, err := regexp.Compile(pat)
			if err != nil {
				return Selection{}, fmt.Errorf("op:%s: %v", pat, err)
			}
			s.Patterns = append(s.Patterns, re)
			continue
		}
		found := false
		for _, c := range Classes {
			if string(c) == item {
				s.Classes, found = append(s.Classes, c), true
			}
		}
		if !found {
			names := make([]string, len(Classes))
			for i, c := range Classes {
				names[i] = string(c)
			}
			return Selection{}, fmt.Errorf("unknown instruction class %q (want %s, or op:REGEX)", item, strings.Join(names, ", "))
		}
	}
	return s, nil
}

// ClassOf is the class of an instruction, "" when it is none of them.
func ClassOf(in *ptx.Instruction) Class {
	space := func() string {
		for _, m := range in.Modifiers {
			switch m {
			case "global", "shared", "local", "param", "const":
				return m
			}
		}
		return "" // generic: may be global
	}
	switch in.Opcode {
	case "bar", "barrier":
		return Barrier
	case "ld", "ldu":
		switch space() {
		case "shared":
			return SharedLoad
		case "global", "":
			return GlobalLoad
		}
	case "st":
		switch space() {
		case "shared":
			return SharedStore
		case "global", "":
			return GlobalStore
		}
	case "atom", "red":
		return Atomic
	case "mbarrier":
		return MBarrier
	case "cp":
		if in.Has("async") {
			return AsyncCopy
		}
	case "fence", "membar":
		return Fence
	}
	return ""
}

// Point is one selected instruction of a kernel.
type Point struct {
	Index int              // its ordinal among the kernel's instructions (ptx.Function.Instructions)
	Instr *ptx.Instruction // the instruction
	Class Class            // its class; "" when only a pattern picked it
}

// Points lists the kernel's instructions that sel picks, in body order.
func Points(fn *ptx.Function, sel Selection) []Point {
	var out []Point
	for i, in := range fn.Instructions() {
		c := ClassOf(in)
		picked := false
		for _, want := range sel.Classes {
			picked = picked || c == want
		}
		for _, re := range sel.Patterns {
			picked = picked || re.MatchString(in.Name())
		}
		if picked {
			out = append(out, Point{Index: i, Instr: in, Class: c})
		}
	}
	return out
}
