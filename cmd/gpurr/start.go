package main

// cgo builds start.c, how the program starts on glibc older than 2.34, into the program.

import "C"
