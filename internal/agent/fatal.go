package agent

/*
#include <stdint.h>
#include "fatal.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpurr/gpurr/internal/agentpath"
	"github.com/gpurr/gpurr/recording"
)

// fatalWait bounds how long a crashing thread waits for the writer; past
// it the program dies with whatever was written.
const fatalWait = 10 * time.Second

var fatalSignalNames = map[syscall.Signal]string{
	syscall.SIGSEGV: "SIGSEGV", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGILL: "SIGILL", syscall.SIGABRT: "SIGABRT", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
}

// watchFatalSignals makes a crash write the recording up to the crash:
// every launch record the agent holds, and the flight recorder's window.
// The crashing thread waits in the C handler while this goroutine writes.
func (r *recorder) watchFatalSignals() error {
	var notify, ack [2]int
	if err := syscall.Pipe2(notify[:], syscall.O_CLOEXEC); err != nil {
		return fmt.Errorf("fatal-signal pipe: %w", err)
	}
	if err := syscall.Pipe2(ack[:], syscall.O_CLOEXEC); err != nil {
		syscall.Close(notify[0])
		syscall.Close(notify[1])
		return fmt.Errorf("fatal-signal pipe: %w", err)
	}
	notified := os.NewFile(uintptr(notify[0]), "gpurr-fatal-notify")
	acked := os.NewFile(uintptr(ack[1]), "gpurr-fatal-ack")
	go func() {
		defer func() { _ = recover() }()
		b := make([]byte, 1)
		for {
			if _, err := notified.Read(b); err != nil {
				return
			}
			r.writeOnFatalSignal(fatalSignalNames[syscall.Signal(b[0]&0x7f)], b[0]&0x80 != 0)
			acked.Write(b)
		}
	}()
	if rc, err := C.gp_watch_fatal_signals(C.int(notify[1]), C.int(ack[0]), C.int(fatalWait.Milliseconds())); rc != 0 {
		return fmt.Errorf("install fatal-signal handlers: %v", err)
	}
	return nil
}

// crashSite says where a crash happened: " at PC in OBJECT+OFFSET (FUNCTION), address ADDR",
// naming gpurr's own agent when the instruction is its, or "" for a stop signal (or no
// context). It runs on the writer while the crashing thread waits.
func (r *recorder) crashSite(sig string) string {
	if sig != "SIGSEGV" && sig != "SIGBUS" && sig != "SIGFPE" && sig != "SIGILL" {
		return ""
	}
	var pc, addr C.uint64_t
	C.gp_fatal_where(&pc, &addr)
	if pc == 0 {
		return ""
	}
	var obj *C.char
	var off C.uint64_t
	C.gp_object_of(pc, &obj, &off)
	where := fmt.Sprintf(" at %#x", uint64(pc))
	if obj != nil {
		path := C.GoString(obj)
		if path == "" {
			path, _ = os.Executable()
		}
		where += fmt.Sprintf(" in %s+%#x", filepath.Base(path), uint64(off))
		if name, err := r.objects.Name(path, uint64(off)); err == nil && name != "" {
			where += " (" + recording.Demangle(name) + ")"
		}
		if filepath.Base(path) == agentpath.FileName {
			where += ", in gpurr's agent"
		}
	}
	if sig == "SIGSEGV" || sig == "SIGBUS" {
		where += fmt.Sprintf(", address %#x", uint64(addr))
	}
	return where
}

// writeOnFatalSignal writes everything drained so far. When the program
// ends (ends), the recording stays without an End record, so readers still
// call it incomplete; a program that handles the signal and goes on keeps
// recording, and its flight recorder keeps its window.
func (r *recorder) writeOnFatalSignal(sig string, ends bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if ends {
		r.logf("error", "the program received %s%s; gpurr wrote what it had before the program ended", sig, r.crashSite(sig))
	} else {
		r.logf("warn", "the program received %s, which it handles; gpurr wrote what it had and goes on recording", sig)
	}
	r.drain()
	if m := r.mem; m != nil {
		m.drain(r)
		if m.flight != nil && ends {
			m.flight.dump(r, m, sig)
		} else if m.store != nil {
			if err := m.store.Flush(); err != nil {
				m.stop(r, fmt.Sprintf("chunk store: %v", err))
			}
		}
	}
	r.writeFrame()
	r.w.Sync()
}
