// Package replay runs one recorded kernel launch again, standalone, in a
// fresh process: it loads the recorded module image, recreates every region
// of the launch at its recorded device address (or relocates the parameter
// words that point into it when the driver grants another address),
// restores the contents the snapshot recorded just before the launch,
// launches with the recorded parameter bytes and shape, and compares the
// result with the contents recorded just after it.
//
// Source and Case are pure Go (a recording read into what a run needs);
// Session does the GPU work through internal/cuda. Extract writes a Case
// as a recording of its own, a reproducer that replays on any machine with
// a suitable GPU. Package tune searches launch shapes on top of Session.
package replay
