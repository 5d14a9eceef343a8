package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/recording"
)

// output is where a verb writes its one output file (-o FILE). A new or replaced file is
// written beside its target and renamed into place when whole, so a failure leaves nothing
// half-written under the name asked for; it is created 0600. A stream (stdout as "-", a
// descriptor of the process such as /dev/stderr, a character device such as /dev/null, a
// FIFO) is written as the bytes come, and needs no --force. A symlink is followed. Every
// verb's -o goes through here, so every verb refuses alike: an existing file without
// --force, a directory, and any path inside the recordings it reads.
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
	if path == "" { // a caller's default; the flag itself refuses "" (outputVar)
		return nil, usageErrorf("%s: %s needs a file name (- for stdout)", verb, flag)
	}
	if path == "-" {
		o.stream = true
		return o, nil
	}
	if fd, ok := descriptorPath(path); ok {
		f, err := openDescriptor(fd, path)
		if err != nil {
			return nil, usageErrorf("%s: %s %s: %v", verb, flag, path, err)
		}
		o.f, o.stream = f, true
		return o, nil
	}
	if err := refuseInputs(verb, flag, path, inputs); err != nil {
		return nil, err
	}
	target, err := realPath(path)
	if err != nil {
		return nil, usageErrorf("%s: %s %s: %v", verb, flag, path, plainError(err))
	}
	o.target = target
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
		f, err := os.CreateTemp(dir, outdir.TempPrefix+"*")
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
	if o.target == p.target {
		return true
	}
	sa, errA := os.Stat(o.target)
	sb, errB := os.Stat(p.target)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// maxSymlinks is how many symlinks to nothing realPath follows, one after another, before it
// takes them for a loop (the kernel's limit, MAXSYMLINKS).
const maxSymlinks = 40

// realPath is path as the system would write it: an absolute path with every symlink of it
// resolved as far as it exists. The folders below the nearest one that exists are joined on
// as written (the verb makes them), and a symlink to nothing is followed to what it names
// (writing it makes that). "link/.." is the folder above link's target, as the system takes it.
func realPath(path string) (string, error) {
	for range maxSymlinks {
		if !filepath.IsAbs(path) {
			wd, err := os.Getwd()
			if err != nil {
				return "", err
			}
			path = wd + string(filepath.Separator) + path
		}
		var rest []string // what lies below p, nearest last
		p := strings.TrimRight(path, string(filepath.Separator))
		if p == "" {
			p = string(filepath.Separator)
		}
		for {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				slices.Reverse(rest)
				return filepath.Join(append([]string{real}, rest...)...), nil
			}
			if link, err := os.Readlink(p); err == nil { // a symlink to nothing
				if !filepath.IsAbs(link) {
					link = parent(p) + string(filepath.Separator) + link
				}
				slices.Reverse(rest)
				path = strings.Join(append([]string{link}, rest...), string(filepath.Separator))
				break
			}
			up := parent(p)
			if up == p {
				return "", fmt.Errorf("%s: no folder of it can be resolved", path)
			}
			rest = append(rest, p[len(up):])
			p = up
		}
	}
	return "", syscall.ELOOP
}

// parent is the folder p is in, taken as written: its last element dropped, without
// filepath.Dir's cleaning (which would take "link/.." for ".").
func parent(p string) string {
	i := strings.LastIndex(p, string(filepath.Separator))
	if i <= 0 {
		return string(filepath.Separator)
	}
	return p[:i]
}

// refuseInputs refuses an output (given as flag path) that is, or would be written inside,
// one of the inputs. A process folder stands for the whole recording it belongs to: the
// verb reads the recording's modules, and writing over another process of it would change
// the recording given. Both sides are compared as the system resolves them (realPath), so a
// symlink into a recording, followed by folders not made yet, is caught too.
func refuseInputs(verb, flag, path string, inputs []string) error {
	out, err := realPath(path)
	if err != nil {
		return usageErrorf("%s: %s %s: %v", verb, flag, path, plainError(err))
	}
	outInfo, outErr := os.Stat(out)
	for _, in := range inputs {
		real, err := realPath(in)
		if err != nil {
			continue
		}
		name := in
		if _, err := os.Stat(filepath.Join(real, recording.EventsFile)); err == nil {
			real = filepath.Dir(real)
			name = fmt.Sprintf("the recording %s is part of (%s)", in, real)
		}
		inInfo, err := os.Stat(real)
		if err != nil {
			continue
		}
		same := outErr == nil && os.SameFile(inInfo, outInfo)
		inside := inInfo.IsDir() && within(out, real)
		if same || inside {
			return usageErrorf("%s: %s %s would write over %s, which it reads: write elsewhere", verb, flag, path, name)
		}
	}
	return nil
}

// within reports whether path is dir or lies inside it (both absolute and clean).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// descriptorPaths are the names of the process's own open files: /dev/stdout, /dev/fd/N.
var descriptorPaths = regexp.MustCompile(`^/(dev/(stdout|stderr)|dev/fd/([0-9]+)|proc/self/fd/([0-9]+))$`)

// descriptorPath reports whether path names one of the process's open files, and which. Such
// an output is written through the descriptor, as the shell set it up: a file it redirected
// to is written at its offset (appended to, for >>), not replaced; a pipe stays a pipe.
// The flag takes /dev/stdout for - (outputPath), so that the verb's report stays off it.
func descriptorPath(path string) (int, bool) {
	m := descriptorPaths.FindStringSubmatch(filepath.Clean(path))
	switch {
	case m == nil:
		return 0, false
	case m[2] == "stdout":
		return 1, true
	case m[2] == "stderr":
		return 2, true
	}
	fd, err := strconv.Atoi(m[3] + m[4])
	return fd, err == nil
}

// openDescriptor is a file of its own for descriptor fd, named path, which must be open for
// writing.
func openDescriptor(fd int, path string) (*os.File, error) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, errors.New("not open in this process")
	}
	if flags&unix.O_ACCMODE == unix.O_RDONLY {
		return nil, errors.New("open for reading only")
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(dup), path), nil
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

// checkOutFolder checks the folder a verb writes (flag path) before the verb reads or runs
// anything: a folder of its own, not a stream; nothing, or an empty folder, where it stands
// (outdir.Check says what else is there); and outside everything the verb reads. Every verb
// that writes a folder checks it here, so all refuse alike.
func checkOutFolder(verb, flag, path string, inputs []string) error {
	if path == "-" {
		return usageErrorf("%s: %s -: %s writes a folder, not a stream: name one", verb, flag, verb)
	}
	if err := outdir.Check(path); err != nil {
		return usageErrorf("%s: %s %v", verb, flag, err)
	}
	if err := refuseInputs(verb, flag, path, inputs); err != nil {
		return err
	}
	if entries, err := os.ReadDir(path); err == nil && len(entries) > 0 {
		return usageErrorf("%s: %s %s already exists and is not empty: choose another or remove it", verb, flag, path)
	}
	return nil
}
