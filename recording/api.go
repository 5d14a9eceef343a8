package recording

import "fmt"

// Launch API calls by their CUPTI driver callback id (Launch.api): the
// launch calls the agent records.
var launchAPIs = map[uint32]string{
	307: "cuLaunchKernel",
	442: "cuLaunchKernel_ptsz",
	477: "cuLaunchCooperativeKernel",
	478: "cuLaunchCooperativeKernel_ptsz",
	514: "cuGraphLaunch",
	515: "cuGraphLaunch_ptsz",
	652: "cuLaunchKernelEx",
	653: "cuLaunchKernelEx_ptsz",
}

// LaunchAPIName names the driver call of a Launch.api callback id, e.g.
// "cuLaunchKernel" for 307; an id it does not know as "launch (cbid N)".
func LaunchAPIName(cbid uint32) string {
	if n, ok := launchAPIs[cbid]; ok {
		return n
	}
	return fmt.Sprintf("launch (cbid %d)", cbid)
}
