# memfs developer entry points.
#   make up [ARGS="..."]   run the memfs server/CLI ("memfs up")
#   make test              set up dependencies (PostgreSQL, FUSE) and run all tests
#   make bench             run the benchmark program

GO ?= go
ARGS ?=

.PHONY: up test bench

up:
	$(GO) run ./cmd/memfs up $(ARGS)

test:
	bash test/run-tests.sh

bench:
	$(GO) run ./test/bench $(ARGS)
