package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/recording"
)

// output is where a verb writes its one output file (-o FILE). A new or replaced file is
// written beside its target and renamed into place when whole, so a failure leaves nothing
// half-written under the name asked for; it is created 0600. A stream (stdout as "-", a
// character device such as /dev/null, a FIFO) is written as the bytes come. A symlink is
// followed. Every verb's -o goes through here, so every verb refuses alike: an existing file
// without --force, a directory, and any path inside the recordings it reads.
type output struct {
	verb    string
	path    string // as given, for messages
	target  string // the file that ends up written, symlinks resolved
	stdout  io.Writer
	f       *os.File // nil for stdout
	stream  bool
	done    bool
	release func() // an interrupt no longer removes the temporary file
	Written int64  // bytes written so far
}

// createOutput opens path for verb's output ("-" is stdout). inputs are what the verb reads
// (recording directories or files): the output may be none of them and lie inside none.
func createOutput(verb, path string, stdout io.Writer, force bool, inputs ...string) (*output, error) {
	return createFlagOutput(verb, "-o", path, stdout, force, inputs...)
}

// createFlagOutput is createOutput for an output file that flag names (tune's --csv).
func createFlagOutput(verb, flag, path string, stdout io.Writer, force bool, inputs ...string) (*output, error) {
	o := &output{verb: verb, path: path, target: path, stdout: stdout}
	if path == "" { // --csv '': "" would resolve to the working directory
		return nil, usageErrorf("%s: %s needs a file name (- for stdout)", verb, flag)
	}
	if path == "-" {
		o.stream = true
		return o, nil
	}
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		o.target = resolved
	} else if link, lerr := os.Readlink(path); lerr == nil {
		// A dangling symlink: write the file it names.
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		o.target = link
	}
	if err := refuseInputs(verb, flag, path, o.target, inputs); err != nil {
		return nil, err
	}
	st, err := os.Stat(o.target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new file.
	case err != nil:
		return nil, usageErrorf("%s: %s %s: %v", verb, flag, path, plainError(err))
	case st.IsDir():
		return nil, usageErrorf("%s: %s %s is a directory: name a file", verb, flag, path)
	case st.Mode()&(os.ModeCharDevice|os.ModeNamedPipe) != 0:
		f, err := os.OpenFile(o.target, os.O_WRONLY, 0)
		if err != nil {
			return nil, usageErrorf("%s: %s %s: %v", verb, flag, path, plainError(err))
		}
		o.f, o.stream = f, true
		return o, nil
	case !st.Mode().IsRegular():
		return nil, usageErrorf("%s: %s %s is not a regular file (%s)", verb, flag, path, st.Mode().Type())
	case !force:
		return nil, usageErrorf("%s: %s %s exists: --force replaces it", verb, flag, path)
	}
	dir := filepath.Dir(o.target)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, usageErrorf("%s: %s %s: directory %s does not exist", verb, flag, path, dir)
	}
	// An interrupt removes the temporary file: Commit has not run.
	o.release, err = outdir.Undoable(func() (func(), error) {
		f, err := os.CreateTemp(dir, "."+filepath.Base(o.target)+".*.tmp")
		if err != nil {
			return nil, err
		}
		o.f = f
		return func() { os.Remove(f.Name()) }, nil
	})
	if err != nil {
		return nil, usageErrorf("%s: %s %s: cannot create a file in %s: %v", verb, flag, path, dir, plainError(err))
	}
	return o, nil
}

func (o *output) Write(p []byte) (n int, err error) {
	if o.f == nil {
		n, err = o.stdout.Write(p)
	} else {
		n, err = o.f.Write(p)
	}
	o.Written += int64(n)
	if err != nil {
		err = &writeFailure{path: o.path, err: err} // the user's path, not the temporary file's
	}
	return n, err
}

// Commit makes the output whole: the temporary file takes the target's name.
func (o *output) Commit() error {
	o.done = true
	if o.stream {
		if o.f == nil {
			return nil
		}
		if err := o.f.Close(); err != nil {
			return &exitError{code: exitFailure, err: fmt.Errorf("%s: write %s: %v", o.verb, o.path, plainError(err))}
		}
		return nil
	}
	defer o.release()
	err := o.f.Close()
	if err == nil {
		err = os.Rename(o.f.Name(), o.target)
	}
	if err != nil {
		os.Remove(o.f.Name())
		return &exitError{code: exitFailure, err: fmt.Errorf("%s: write %s: %v", o.verb, o.path, plainError(err))}
	}
	return nil
}

// Abort drops what was written, unless Commit ran; defer it after createOutput.
func (o *output) Abort() {
	if o.done {
		return
	}
	o.done = true
	if o.stream {
		if o.f != nil {
			o.f.Close()
		}
		return
	}
	o.f.Close()
	os.Remove(o.f.Name())
	o.release()
}

// sameFile reports whether o and p would end up as one file: the same path spelt two ways,
// through a symlink or a symlinked folder, or a hard link; or stdout twice.
func (o *output) sameFile(p *output) bool {
	if o.stream || p.stream {
		return o.path == "-" && p.path == "-"
	}
	a, errA := absTarget(o.target)
	b, errB := absTarget(p.target)
	if errA == nil && errB == nil && a == b {
		return true
	}
	sa, errA := os.Stat(o.target)
	sb, errB := os.Stat(p.target)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// absTarget is target as an absolute path with the symlinks of its folder resolved.
func absTarget(target string) (string, error) {
	if dir, err := filepath.EvalSymlinks(filepath.Dir(target)); err == nil {
		target = filepath.Join(dir, filepath.Base(target))
	}
	return filepath.Abs(target)
}

// refuseInputs refuses an output (given as flag path) that is, or lies inside, one of the
// inputs.
func refuseInputs(verb, flag, path, target string, inputs []string) error {
	abs, err := absTarget(target)
	if err != nil {
		return usageErrorf("%s: %s %s: %v", verb, flag, path, err)
	}
	outInfo, statErr := os.Stat(abs)
	for _, in := range inputs {
		real, err := filepath.EvalSymlinks(in)
		if err != nil {
			continue
		}
		if real, err = filepath.Abs(real); err != nil {
			continue
		}
		read := map[string]string{real: in}
		// A process directory given alone reads the module images of the recording it is in.
		if _, err := os.Stat(filepath.Join(real, recording.EventsFile)); err == nil {
			modules := filepath.Join(filepath.Dir(real), recording.ModulesDir)
			read[modules] = filepath.Join(in, "..", recording.ModulesDir)
		}
		for real, name := range read {
			inInfo, err := os.Stat(real)
			if err != nil {
				continue
			}
			same := statErr == nil && os.SameFile(inInfo, outInfo)
			inside := inInfo.IsDir() && strings.HasPrefix(abs, real+string(filepath.Separator))
			if same || inside {
				return usageErrorf("%s: %s %s would write over %s, which it reads: write elsewhere", verb, flag, path, name)
			}
		}
	}
	return nil
}

// plainError drops the path an *os.PathError carries (it may name a temporary file the user
// never asked for); messages name the user's path themselves.
func plainError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

var _ io.Writer = (*output)(nil)
