package recording

import (
	"bytes"
	"fmt"
	"strings"
)

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
	// Graph node APIs: a captured launch made by adding or changing a kernel node.
	502: "cuGraphAddKernelNode",
	521: "cuGraphKernelNodeSetParams",
	538: "cuGraphExecKernelNodeSetParams",
	689: "cuGraphAddKernelNode_v2",
	691: "cuGraphKernelNodeSetParams_v2",
	692: "cuGraphExecKernelNodeSetParams_v2",
	712: "cuGraphAddNode",
	713: "cuGraphNodeSetParams",
	714: "cuGraphExecNodeSetParams",
	723: "cuGraphAddNode_v2",
}

// GraphNodeAPI reports whether a Launch.api callback id is a graph node API
// (cuGraphAddKernelNode, cuGraphExecKernelNodeSetParams, ...): the launch
// is a kernel node it added or changed, captured as stream capture's are.
func GraphNodeAPI(cbid uint32) bool {
	n := launchAPIs[cbid]
	return strings.HasPrefix(n, "cuGraph") && !strings.HasPrefix(n, "cuGraphLaunch")
}

// LaunchAPIName names the driver call of a Launch.api callback id, e.g.
// "cuLaunchKernel" for 307; an id it does not know as "launch (cbid N)".
func LaunchAPIName(cbid uint32) string {
	if n, ok := launchAPIs[cbid]; ok {
		return n
	}
	return fmt.Sprintf("launch (cbid %d)", cbid)
}

// DeviceLaunchLogPrefix begins the log entry the agent writes for a module
// whose kernels launch kernels themselves (DeviceLaunches).
const DeviceLaunchLogPrefix = "device-side launches: "

// DeviceLaunches reports whether a module image (cubin or PTX) calls the
// device runtime's launch (dynamic parallelism). Such launches go through
// no host API: CUPTI's callbacks never see them, and the kernels they run
// have no launch, parameters or line.
func DeviceLaunches(image []byte) bool { return bytes.Contains(image, []byte("cudaLaunchDevice")) }
