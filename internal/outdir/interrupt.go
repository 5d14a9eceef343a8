package outdir

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts holds, while a command writes its output, how to undo what it made so far. An
// interrupt (Ctrl-C, SIGTERM, SIGHUP, or a write to a pipe whose reader went away, as after
// `gpurr demo -o DIR | head`) runs every undo and ends the process with the shell's
// code for the signal (128 + its number), so that the same command can run again into the same
// place instead of meeting a hidden temporary file or folder there.
var interrupts struct {
	sync.Mutex
	catch sync.Once
	next  int
	undo  map[int]func()
}

// interruptSignals are the signals that end a command writing its output.
var interruptSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE}

// Undoable runs create, which creates something of the command's output (a temporary file, a
// folder, a marker) and returns how to remove it. When create succeeds, an interrupt until
// release runs that undo before the process exits; release, which may be called more than
// once, is for when the output is whole or already undone. create runs with interrupts held
// off, so that none comes between what it creates and its undo being known: one that arrives
// meanwhile waits for create and then undoes what it made. create must not call Undoable.
func Undoable(create func() (undo func(), err error)) (release func(), err error) {
	interrupts.catch.Do(func() {
		// A signal the process ignores stays ignored: nohup starts it ignoring SIGHUP, and a
		// shell without job control starts a command it runs in the background ignoring
		// SIGINT, so that hanging up or Ctrl-C leaves it running. Caught, that signal undid
		// the output and ended the command it was meant to leave alone.
		var caught []os.Signal
		for _, sig := range interruptSignals {
			if !signal.Ignored(sig) {
				caught = append(caught, sig)
			}
		}
		if len(caught) == 0 {
			return
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, caught...)
		go onInterrupt(ch, caught)
	})
	interrupts.Lock()
	defer interrupts.Unlock()
	undo, err := create()
	if err != nil {
		return func() {}, err
	}
	if interrupts.undo == nil {
		interrupts.undo = map[int]func(){}
	}
	id := interrupts.next
	interrupts.next++
	interrupts.undo[id] = undo
	return func() {
		interrupts.Lock()
		delete(interrupts.undo, id)
		interrupts.Unlock()
	}, nil
}

// Add runs add, which adds a file or folder to an output that Undoable knows how to undo (a
// file of an output folder), with interrupts held off: an interrupt's undo never runs while
// add does, and add never runs once one has begun (Add waits for the process to end). An
// interrupt does not stop the command's goroutines, so without it one still writing the
// output could make a file, or its folders again, after the undo had looked, and leave it
// behind. Writing into a file already made needs no Add: the undo removes the file whole.
// add must not call Add or Undoable.
func Add(add func() error) error {
	interrupts.Lock()
	defer interrupts.Unlock()
	return add()
}

// onInterrupt waits for an interrupt, undoes every output still being written, the newest
// first, and ends the process. The lock is kept to the end: no output is released or begun
// meanwhile. A second interrupt while it undoes ends the process at once, as the first would
// have without outputs to undo: an undo that hangs (a folder on a network file system gone
// away) is not the end of what the user can do.
func onInterrupt(ch chan os.Signal, caught []os.Signal) {
	sig := <-ch
	signal.Stop(ch)
	signal.Reset(caught...)
	interrupts.Lock()
	for id := interrupts.next - 1; id >= 0; id-- {
		if undo, ok := interrupts.undo[id]; ok {
			undo()
		}
	}
	code := 128 + int(syscall.SIGINT)
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	os.Exit(code)
}
