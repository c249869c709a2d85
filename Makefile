# strata — see README.md. Every target works as root on a fresh Debian machine:
# missing system packages are installed with apt-get, Go tools with go install.
SHELL := /bin/bash
GO ?= go
GOBIN ?= $(shell $(GO) env GOPATH)/bin
BIN := bin/strata
PKGS := ./...
APT_PKGS := fuse-overlayfs unionfs-fuse attr fuse3 tmux git zsh fish xfsprogs btrfs-progs ccache make gcc
GOLANGCI_VERSION := v2.15.0
GOFUMPT_VERSION := v0.12.0
TEST_TIMEOUT ?= 15m
FUZZTIME ?= 20s
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
RELEASE_ARCHES := amd64 arm64

.PHONY: all deps build run arch test test-e2e check install-check release fmt lint vet bench fuzz demo clean tools

all: build

# deps installs the system packages strata and its tests use, if any is missing.
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# build writes strata-init beside strata, after it: sessions start it as
# their init (engine/local/initbin.go), a smaller process than strata.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/strata
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(dir $(BIN))strata-init ./cmd/strata-init

# release writes static binaries for linux/amd64 and linux/arm64, the version
# stamped in, and their SHA256SUMS, to dist/: strata and strata-init (install
# it beside strata, named strata-init).
release:
	rm -rf dist && mkdir -p dist
	@for arch in $(RELEASE_ARCHES); do \
		echo "building dist/strata-$(VERSION)-linux-$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
			-o dist/strata-$(VERSION)-linux-$$arch ./cmd/strata || exit 1; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
			-o dist/strata-init-$(VERSION)-linux-$$arch ./cmd/strata-init || exit 1; \
	done
	cd dist && sha256sum strata-* >SHA256SUMS && cat SHA256SUMS

# run opens the TUI over a practice tree it makes on the first run, or over
# SOURCE=/path/to/tree.
run: deps build
	scripts/run.sh

# $(PKGS) includes the patched Bubble Tea (third_party/bubbletea/PATCHES.md)
# and its upstream tests.
test: deps
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

test-e2e: deps build
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'E2E' ./cmd/strata/ ./tui/

tools:
	@test -x $(GOBIN)/golangci-lint || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	@test -x $(GOBIN)/gofumpt || $(GO) install mvdan.cc/gofumpt@$(GOFUMPT_VERSION)

fmt: tools
	@out=$$($(GOBIN)/gofumpt -l $$(ls -d */ | grep -v '^third_party/')); if [ -n "$$out" ]; then echo "not gofumpt-formatted:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

lint: tools
	$(GOBIN)/golangci-lint run $(PKGS)

# arch checks the architecture rules (scripts/arch): runtime seams, dialect
# names, a UI-free core. `make test` runs them too.
arch:
	$(GO) test -count=1 ./scripts/arch/
	$(GO) test -count=1 -run TestHelpersLiveInFsx ./fsx/

check: deps fmt vet lint install-check arch
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

# install-check proves `go install github.com/stratahq/strata/cmd/strata@VERSION`
# works: it serves this checkout from a local module proxy and installs from it.
install-check:
	scripts/check-go-install.sh

# bench times strata against its baselines in one run (docs/bench.md): as
# root it loop-mounts ext4, XFS (reflink) and btrfs images for the reflink
# rows (about 20 GB sparse each, -cow-size). BIG=1 adds the 1,000,000-file
# tree; BENCH_ARGS passes more flags, e.g. BENCH_ARGS="-only reflink,ccache".
bench: deps build
	$(GO) run ./cmd/strata-bench $(if $(BIG),-big,) $(BENCH_ARGS)

fuzz:
	@for pkg in ./overlay ./overlay/mount ./overlay/store ./diffview; do \
		for f in $$($(GO) test -list 'Fuzz.*' $$pkg | grep ^Fuzz); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf bin dist

demo: deps
	scripts/demo.sh
