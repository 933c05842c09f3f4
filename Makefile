# memfs developer entry points.
#   make up [ARGS="..."]     ./up.sh ARGS: run everything on one machine (memfs up): serve, a demo store, a worker mounting it
#                            (run ./up.sh itself to see memfs up's exit status: make turns a Ctrl-C into its own 130)
#   make serve [ARGS="..."]  run the store service alone (memfs serve)
#   make test                set up dependencies (PostgreSQL, FUSE) and run all tests
#   make bench [ARGS="..."]  run the benchmarks (test/run-bench.sh: go run ./test/bench, with a throwaway PostgreSQL for D1)

GO ?= go
ARGS ?=
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: up serve test bench FORCE

# The binary is built, then run (not "go run", which turns the child's
# clean exit after Ctrl-C into exit status 1). -buildvcs=auto stamps the
# git revision that memfs version prints, even where GOFLAGS turns it off
# (outside a git checkout it stamps nothing and still builds).
bin/memfs: FORCE
	$(GO) build -buildvcs=auto -o bin/memfs ./cmd/memfs

# up.sh builds bin/memfs itself and execs it.
up:
	./up.sh $(ARGS)

serve: bin/memfs
	./bin/memfs serve $(ARGS)

test:
	bash test/run-tests.sh

bench:
	bash test/run-bench.sh $(ARGS)
