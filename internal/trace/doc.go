// Package trace writes gpurr recordings as timelines: Chrome trace-event
// JSON (chrome://tracing, Perfetto UI) and Perfetto's protobuf TracePacket
// stream, which the Perfetto UI opens at sizes JSON cannot reach.
//
// Each recorded process (each rank of a job) is a process of the timeline.
// Its kernels are slices on a track per device and stream, on the GPU
// clock; its launch calls are on the host threads that made them, with a
// flow arrow to the kernels they ran. A kernel run by a CUDA graph replay
// is named and annotated with the Python line of the launch that captured
// it, found through the recording's graph nodes (recording.Links), never
// by matching names. gpurr's own memory-capture kernels have a track of
// their own, so their cost on the GPU shows. Recordings of several
// processes and hosts share one time axis: each process's clock is mapped
// to the wall clock through Process.start_ns and start_unix_ns.
//
// Write streams: it reads each process's recording once, frame by frame,
// and keeps only what joins kernels to their launch calls that are still
// in flight (recording.Join's bounded window) and the captured launches
// that graph replays name, so a recording of millions of launches is
// written in memory that does not grow with it. docs/trace.md describes
// the tracks and arguments.
package trace
