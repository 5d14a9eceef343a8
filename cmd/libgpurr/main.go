// Command libgpurr is gpurr's agent, built with -buildmode=c-shared as
// bin/libgpurr.so. The CUDA driver loads it into the recorded program when
// CUDA_INJECTION64_PATH names it, and calls InitializeInjection once, from
// cuInit. All behaviour lives in internal/agent.
package main

import "C"

import "github.com/gpurr/gpurr/internal/agent"

//export InitializeInjection
func InitializeInjection() C.int { return C.int(agent.Initialize()) }

func main() {}
