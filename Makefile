# ktest's front door. `make demo` runs the demo suite, `make test` the test suite.
# Both build their own virtual environment in .venv and obtain the Kubernetes
# binaries (cached under ~/.cache/ktest after the first time).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
K8S_VERSION ?=
# The suite also checks that an older minor runs (tests/controlplane/test_versions.py).
OLDER_K8S_VERSION ?= 1.35
# ktest's tests and the demo suite, on two xdist workers (control planes and tests overlap
# well on 2 cores).
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
KTEST := $(BIN)/ktest
VERSION_FLAG := $(if $(K8S_VERSION),--k8s-version $(K8S_VERSION),)

.PHONY: all venv binaries binaries-older test test-kind demo lint bench clean-venv docker-engine kind-images lint-workflows

all: venv binaries

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

binaries: venv
	$(KTEST) binaries install $(VERSION_FLAG)

binaries-older: venv
	$(KTEST) binaries install --k8s-version $(OLDER_K8S_VERSION)

test: venv lint-workflows binaries binaries-older docker-engine kind-images
	KTEST_OLDER_K8S_VERSION=$(OLDER_K8S_VERSION) $(BIN)/python -m pytest -n $(TEST_WORKERS) tests examples --ignore=tests/kind_backend --ignore=tests/kind $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)
	KTEST_OLDER_K8S_VERSION=$(OLDER_K8S_VERSION) $(BIN)/python -m pytest tests/kind $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)
	$(MAKE) test-kind

# The kind layer for real: the kind backend's own tests and the demo suite on one shared kind
# cluster (both xdist workers use it), created from the node image for K8S_VERSION.
test-kind: venv
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --ktest-backend kind tests/kind_backend examples $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)

demo: venv binaries
	$(BIN)/python -m pytest examples $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check ktest tests fixtures bench examples
	$(BIN)/mypy ktest

# actionlint and zizmor on every workflow and action in .github/ and on what `ktest init
# github-actions` writes; any finding fails. actionlint is built once from its Go module into
# .venv/bin (scripts/ci/install-actionlint); zizmor comes with the dev extra.
lint-workflows: venv
	BIN=$(BIN) scripts/ci/lint-workflows

clean-venv:
	rm -rf $(VENV)

# A Docker engine for the kind tests (Debian, root): installs docker.io, starts dockerd, and on
# machines lacking CAP_SYS_RESOURCE installs the runc wrapper kind nodes need. Idempotent.
docker-engine:
	scripts/docker-engine

# Offline kind node images for K8S_VERSION and OLDER_K8S_VERSION (cold: Go builds and debootstrap,
# tens of minutes; warm: a label check of seconds).
kind-images: venv docker-engine binaries binaries-older
	$(KTEST) kind build-image $(VERSION_FLAG)
	$(KTEST) kind build-image --k8s-version $(OLDER_K8S_VERSION)

# ktest against Go envtest and issue 15's goals in one interleaved run (cold start, attach to a
# warm control plane, plugin cost, memory; a couple of minutes). BENCH_ARGS="--runs 9 --suite tests/plugin".
BENCH_ARGS ?=
bench: venv binaries
	$(BIN)/python bench/compare_envtest.py $(BENCH_ARGS)

# The seeded-bug detection matrix: the demo suite against the correct operators and every seeded bug.
.PHONY: matrix
matrix: venv binaries
	$(BIN)/python scripts/detection_matrix.py $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS),)
