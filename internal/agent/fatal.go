package agent

/*
#include "fatal.h"
*/
import "C"

import (
	"fmt"
	"os"
	"syscall"
	"time"
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
		r.logf("error", "the program received %s; gpurr wrote what it had before the program ended", sig)
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
