package recording_test

import (
	"fmt"
	"log"

	"github.com/gpurr/gpurr/recording"
)

// Read a recording and print, for each kernel that ran in a CUDA graph
// replay, the Python line that captured it.
func Example() {
	set, err := recording.Open("../testdata/recordings/torch-graphs")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range set.Processes {
		data, err := p.Load()
		if err != nil {
			log.Fatal(err)
		}
		links := data.Links()
		seen := map[string]bool{}
		for _, a := range data.Activities {
			// The launch that captured the graph node this kernel ran.
			launch := links.CaptureLaunch(a)
			if launch == nil {
				continue
			}
			// LineCallstack: a kernel launched in an autograd node's
			// backward counts at its forward line.
			f := links.UserFrame(links.LineCallstack(launch))
			line := fmt.Sprintf("torch_graphs.py:%d replays %.40s", f.GetLine(), links.KernelName(links.Kernel(launch.GetKernelId())))
			if !seen[line] {
				seen[line] = true
				fmt.Println(line)
			}
		}
	}
	// Output:
	// torch_graphs.py:21 replays void at::native::vectorized_elementwise_
	// torch_graphs.py:22 replays void at::native::vectorized_elementwise_
}
