# gpurr build. `make` builds bin/gpurr (the CLI) and bin/libgpurr.so (the
# agent the CUDA driver injects). No CUDA SDK is needed: CUDA and CUPTI are
# opened with dlopen at run time. `make test` runs every test that needs no
# GPU; scripts/gpu-check runs the GPU suite on a GPU machine.
GO ?= go
export CGO_ENABLED := 1

.PHONY: all build install wheel wheel-aarch64 test-wheel test-wheel-aarch64 test lint fuzz proto clean gpu-check

all: build

build: bin/gpurr bin/libgpurr.so bin/kernels.test bin/cgolaunch

# gpurr and its agent run on glibc 2.17 and later, not only on the glibc that builds them (the
# wheel's manylinux tag; scripts/check-wheel checks it): they link against stand-ins of the old
# libpthread and libdl (scripts/glibc-stubs), cmd/gpurr/start.c starts the program as glibc 2.33
# did, and the CLI resolves names with Go's own resolver (netgo), which needs nothing of libc.
# $(call portable,DIR): the go build flags that link against the stand-ins in DIR.
portable = -tags netgo -ldflags="-extldflags '-L$(CURDIR)/$(1) -Wl,--push-state,--no-as-needed -lpthread -ldl -Wl,--pop-state'"

bin/glibc/libpthread.so: scripts/glibc-stubs
	scripts/glibc-stubs $(CC) $(@D)

bin/gpurr: bin/glibc/libpthread.so FORCE
	$(GO) build -buildvcs=auto $(call portable,bin/glibc) -o $@ ./cmd/gpurr

# The memory-capture kernel's GPU test and benchmark, run on the GPU machine
# by scripts/gpu-check (which has no Go).
bin/kernels.test: FORCE
	$(GO) test -c -o $@ ./internal/kernels

# A Go program that launches CUDA kernels through cgo: gputest's native.symbols_go records it.
bin/cgolaunch: FORCE
	$(GO) build -o $@ ./gputest/workloads/cgolaunch

bin/libgpurr.so: bin/glibc/libpthread.so FORCE
	$(GO) build -buildvcs=auto $(call portable,bin/glibc) -buildmode=c-shared -o $@ ./cmd/libgpurr
	rm -f bin/libgpurr.h

# The installed layout agentpath looks for: PREFIX/bin/gpurr beside PREFIX/lib/gpurr/libgpurr.so.
PREFIX ?= $(HOME)/.local
install: bin/gpurr bin/libgpurr.so
	install -d $(PREFIX)/bin $(PREFIX)/lib/gpurr
	install -m 0755 bin/gpurr $(PREFIX)/bin/gpurr
	install -m 0755 bin/libgpurr.so $(PREFIX)/lib/gpurr/libgpurr.so

# The wheel pip installs: gpurr and its agent inside a Python package (scripts/build-wheel).
wheel: bin/gpurr bin/libgpurr.so
	scripts/build-wheel

# The aarch64 wheel (Grace Hopper), cross-built on x86-64 (Debian: apt-get install
# gcc-aarch64-linux-gnu; qemu-user to test it).
AARCH64_CC ?= aarch64-linux-gnu-gcc
wheel-aarch64: bin/aarch64/glibc/libpthread.so
	CC=$(AARCH64_CC) GOARCH=arm64 $(GO) build -buildvcs=auto $(call portable,bin/aarch64/glibc) -o bin/aarch64/gpurr ./cmd/gpurr
	CC=$(AARCH64_CC) GOARCH=arm64 $(GO) build -buildvcs=auto $(call portable,bin/aarch64/glibc) -buildmode=c-shared -o bin/aarch64/libgpurr.so ./cmd/libgpurr
	rm -f bin/aarch64/libgpurr.h
	scripts/build-wheel --bin bin/aarch64 --arch aarch64

bin/aarch64/glibc/libpthread.so: scripts/glibc-stubs
	scripts/glibc-stubs $(AARCH64_CC) $(@D)

# Builds the aarch64 wheel and runs its gpurr under qemu-user, and the agent's aarch64 stack
# walk; skips, saying so, without the cross compiler or qemu (scripts/test-wheel-aarch64).
test-wheel-aarch64:
	scripts/test-wheel-aarch64

# Installs the wheel into a fresh venv, offline, and runs what a user would (scripts/test-wheel).
test-wheel: wheel
	scripts/test-wheel

test: build lint
	$(GO) tool gotestsum --format pkgname -- ./...
	$(MAKE) --no-print-directory test-wheel
	scripts/test-wheel-aarch64

# gofmt, go.mod and go.sum as go mod tidy leaves them, go vet and staticcheck (pinned in go.mod
# as a tool, so CI needs nothing else). Tidy also loads the tests of our dependencies, whose
# modules a build does not fetch: where the module cache lacks them, it fetches them from the
# module proxy as the build does (with them cached it needs no network).
lint:
	@unformatted=$$(gofmt -l .); test -z "$$unformatted" || { echo "$$unformatted"; echo "gofmt: the files above need formatting"; exit 1; } >&2
	@$(GO) mod tidy -diff || { echo "go mod tidy: go.mod or go.sum is not tidy (the diff above); run go mod tidy"; exit 1; } >&2
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# Short fuzzing pass over every decoder of untrusted bytes.
fuzz:
	$(GO) test ./recording -run '^$$' -fuzz FuzzScan -fuzztime 30s
	$(GO) test ./recording/chunkstore -run '^$$' -fuzz FuzzPack -fuzztime 30s
	$(GO) test ./recording/chunkstore -run '^$$' -fuzz FuzzIndex -fuzztime 30s
	$(GO) test ./recording/cubin -run '^$$' -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./recording/internal/xla -run '^$$' -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./internal/fatbin -run '^$$' -fuzz FuzzPTXs -fuzztime 30s
	$(GO) test ./internal/manifest -run '^$$' -fuzz FuzzRead -fuzztime 30s
	$(GO) test ./internal/trace -run '^$$' -fuzz FuzzValidateChrome -fuzztime 30s
	$(GO) test ./internal/ptx -run '^$$' -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./recording/memhash -run '^$$' -fuzz FuzzHash -fuzztime 30s
	$(GO) test ./internal/dtype -run '^$$' -fuzz FuzzNPY -fuzztime 30s
	$(GO) test ./internal/nanscan -run '^$$' -fuzz FuzzCount -fuzztime 30s
	$(GO) test ./internal/query -run '^$$' -fuzz FuzzLoad -fuzztime 30s
	$(GO) test ./internal/instrument -run '^$$' -fuzz FuzzInject -fuzztime 30s
	$(GO) test ./internal/instrument -run '^$$' -fuzz FuzzLiveProbes -fuzztime 30s
	$(GO) test ./recording -run '^$$' -fuzz FuzzProbeCTAs -fuzztime 30s
	$(GO) test ./internal/replay -run '^$$' -fuzz FuzzModuleKind -fuzztime 30s
	$(GO) test ./internal/cupti/locate -run '^$$' -fuzz FuzzCheckLibrary -fuzztime 30s

# Regenerate the .pb.go files from the committed .proto files (needs protoc).
proto:
	scripts/gen-proto

gpu-check: build
	scripts/gpu-check

clean:
	rm -rf bin

FORCE:
