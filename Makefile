# memfs developer entry points.
#   make up [ARGS="..."]     run everything on one machine (memfs up): serve, a demo store, a worker mounting it
#   make serve [ARGS="..."]  run the store service alone (memfs serve)
#   make test                set up dependencies (PostgreSQL, FUSE) and run all tests
#   make bench [ARGS="..."]  run the benchmark program (go run ./test/bench)

GO ?= go
ARGS ?=
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: up serve test bench

up:
	$(GO) run ./cmd/memfs up $(ARGS)

serve:
	$(GO) run ./cmd/memfs serve $(ARGS)

test:
	bash test/run-tests.sh

bench:
	$(GO) run ./test/bench $(ARGS)
