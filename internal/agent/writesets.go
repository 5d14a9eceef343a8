package agent

import "github.com/gpurr/gpurr/internal/ptx"

// moduleWriteSets reads a module's PTX and proves, kernel by kernel, which parameter words no
// store goes through (internal/ptx): the writer marks those ParamInfos proved_read_only, which
// hash mode can skip (a region only such words point into cannot change). Nil when the PTX
// does not parse: nothing is proved.
func moduleWriteSets(text []byte) map[string]*ptx.WriteSet {
	m, err := ptx.Parse(text)
	if err != nil {
		return nil
	}
	out := map[string]*ptx.WriteSet{}
	sets := m.WriteSets()
	for i := range sets {
		out[sets[i].Kernel] = &sets[i]
	}
	return out
}
