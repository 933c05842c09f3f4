# memfs developer entry points.
#   make serve [ARGS="..."]  run the store service (memfs serve) from this checkout
#   make test                set up dependencies (PostgreSQL, FUSE) and run all tests
#   make bench [ARGS="..."]  run the benchmark program (go run ./test/bench)

GO ?= go
ARGS ?=
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: serve test bench

serve:
	$(GO) run ./cmd/memfs serve $(ARGS)

test:
	bash test/run-tests.sh

bench:
	$(GO) run ./test/bench $(ARGS)
