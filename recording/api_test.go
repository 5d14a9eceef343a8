package recording

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestLaunchAPIsMatchAgentTable holds launchAPIs to the agent's table of
// launch APIs (internal/agent/launchapi.h), the one place a launch API is
// added: every row's callback id and name, and no other.
func TestLaunchAPIsMatchAgentTable(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "internal", "agent", "launchapi.h"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\s*X\((\w+), (\d+), [01], GP_SHAPE_\w+\)`).FindAllSubmatch(src, -1)
	if len(rows) == 0 {
		t.Fatal("launchapi.h: no rows of GP_LAUNCH_APIS")
	}
	table := map[uint32]string{}
	for _, r := range rows {
		cbid, err := strconv.ParseUint(string(r[2]), 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		table[uint32(cbid)] = string(r[1])
	}
	for cbid, name := range table {
		if got := launchAPIs[cbid]; got != name {
			t.Errorf("callback id %d: launchapi.h names %s, launchAPIs %q", cbid, name, got)
		}
	}
	for cbid, name := range launchAPIs {
		if _, ok := table[cbid]; !ok {
			t.Errorf("launchAPIs has %d (%s), which launchapi.h's table lacks", cbid, name)
		}
	}
}

// TestGraphNodeAPI tells the graph node APIs' launches (a kernel node added
// or changed) from kernel and graph launches.
func TestGraphNodeAPI(t *testing.T) {
	for cbid, want := range map[uint32]bool{502: true, 689: true, 692: true, 714: true, 723: true, 307: false, 652: false, 514: false, 515: false, 9999: false} {
		if got := GraphNodeAPI(cbid); got != want {
			t.Errorf("GraphNodeAPI(%d) = %v, want %v", cbid, got, want)
		}
	}
}

// TestDeviceLaunches finds the device runtime's launch in a cubin's symbol
// names and in PTX, and nothing in a module without it.
func TestDeviceLaunches(t *testing.T) {
	for image, want := range map[string]bool{
		"\x7fELF...\x00cudaLaunchDeviceV2\x00cudaGetParameterBufferV2\x00": true,
		".extern .func (.param .b32 func_retval0) cudaLaunchDeviceV2(":     true,
		"\x7fELF...\x00_Z6kernelPf\x00":                                    false,
	} {
		if got := DeviceLaunches([]byte(image)); got != want {
			t.Errorf("DeviceLaunches(%q) = %v, want %v", image, got, want)
		}
	}
}
