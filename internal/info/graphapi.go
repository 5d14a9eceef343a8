package info

import (
	"fmt"
	"strings"
)

// graphAPI says what of the graphs the program built through the graph API
// the recording links to a launch, and what it cannot.
func (p *Process) graphAPI() string {
	var parts []string
	if p.GraphBuilt > 0 {
		parts = append(parts, fmt.Sprintf("%s added or changed (counted as captured): their replays' kernels link to them", Count(p.GraphBuilt, "kernel node")))
	}
	if p.ConditionalNodes > 0 {
		parts = append(parts, fmt.Sprintf("%s: their bodies' kernels link through their own nodes, which way the condition went is not recorded", Count(p.ConditionalNodes, "conditional node")))
	}
	if p.MemoryNodes > 0 {
		parts = append(parts, fmt.Sprintf("%s: the memory they allocate and free is not recorded, nor hashed", Count(p.MemoryNodes, "memory node")))
	}
	return strings.Join(parts, "; ")
}
