# ktest's front door. `make demo` runs the demo suite, `make test` the test suite.
# Both build their own virtual environment in .venv and obtain the Kubernetes
# binaries (cached under ~/.cache/ktest after the first time).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
K8S_VERSION ?=
# The suite also checks that an older minor runs (tests/controlplane/test_versions.py).
OLDER_K8S_VERSION ?= 1.36
# xdist workers. The tests mostly wait on the control plane: on 2 cores a part of the bare suite
# alone kept the CPU 54% busy at -n 2 and 85% at -n 4 (0.73x the wall time), so `make check`, which
# runs alone, takes CHECK_WORKERS=4. Beside the other stages of `make test` (BARE_WORKERS) the bare
# suite took 20:41 at -n 2 and 18:55 at -n 3 on 2026-12-07 (the suite lighter by then: at -n 3 it
# had been the slower, 27:43 against 23:55). The kind layer and the floors run on TEST_WORKERS.
TEST_WORKERS ?= 2
BARE_WORKERS ?= 3
CHECK_WORKERS ?= 4
PYTEST_ARGS ?=
KTEST := $(BIN)/ktest
VERSION_FLAG := $(if $(K8S_VERSION),--k8s-version $(K8S_VERSION),)

.PHONY: docs reference
.PHONY: all venv binaries node-tools go-operators binaries-older test check test-kind test-floors demo lint bench clean-venv docker-engine kind-images \
	kind-image kind-image-older test-kind-older lint-workflows browser

all: venv binaries

# The Go operators ktest's own tests run as subprocesses, built (or found cached) before the suite:
# cold, a controller-runtime build takes minutes, more than one test's timeout should cover.
GO_OPERATORS := fixtures/go-manager fixtures/go-webhook-manager
go-operators: venv
	$(BIN)/python -c "import sys; from ktest.operators import build_go_binary; [build_go_binary(d) for d in sys.argv[1:]]" $(GO_OPERATORS)
	$(BIN)/python -c "from ktest.operators import build_go_binary; build_go_binary('fixtures/kubebuilder-project', package='./cmd')"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml offline/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# pytest-kind-ng replaced pytest-kind in the dev extra; both install the module pytest_kind, so an
	@# older venv's pytest-kind goes (with the fork, whose files its removal takes) before the install.
	$(BIN)/pip uninstall --quiet --yes pytest-kind pytest-kind-ng 2>/dev/null
	$(BIN)/pip install --quiet -e '.[dev]'
	@# ktest's offline builders (offline/, the ktest-offline distribution): this machine builds the
	@# binaries and kind node images from Go modules when it cannot download them.
	$(BIN)/pip install --quiet -e ./offline
	touch $@

binaries: venv
	$(KTEST) binaries install $(VERSION_FLAG)

# kube-scheduler and KWOK for simulated nodes (ktest_nodes; cold: minutes of Go builds, once).
node-tools: venv binaries
	$(KTEST) binaries install --nodes $(VERSION_FLAG)

binaries-older: venv
	$(KTEST) binaries install --nodes --k8s-version $(OLDER_K8S_VERSION)

# The stages are planned in scripts/stages/stage_plan.py (`scripts/test-stages --plan` prints the plan):
# the bare suite on the critical path, lint, the sdist and wheel (built once), the older minor's
# tests and the kind layer's own tests beside it, then the kind layer; the floors and the example
# project once the kind layer or the bare suite has passed, whichever ends first. It ends with the stage table (wall times, slowest tests, skips against each
# stage's allowance), kept with each stage's log and JUnit XML in .ktest-stages/.
STAGES_ENV = BIN=$(BIN) MAKE="$(MAKE)" TEST_WORKERS=$(TEST_WORKERS) BARE_WORKERS=$(BARE_WORKERS) CHECK_WORKERS=$(CHECK_WORKERS) OLDER_K8S_VERSION=$(OLDER_K8S_VERSION) \
	VERSION_ARGS="$(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),)" PYTEST_ARGS="$(PYTEST_ARGS)"
test: venv lint-workflows docker-engine browser
	$(STAGES_ENV) scripts/test-stages

# The inner loop (a few minutes warm): lint, and the bare suite without the tests marked slow
# (child pytest sessions, control planes of their own, builds). `make test` runs everything.
check: venv lint-workflows binaries node-tools go-operators browser
	$(STAGES_ENV) scripts/test-stages --check

# The kind layer for real: the kind backend's own tests, the Pod-status parity set (tests/parity, which
# the bare suite runs on simulated nodes) and the demo suite on one shared kind
# cluster (both xdist workers use it), created from the node image for K8S_VERSION.
test-kind: venv
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --ktest-backend kind tests/on_kind tests/parity examples $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)

# The kind layer's own tests for the older version's node image as well (tests/kind_machinery runs its
# image tests for both versions; cold, building that image takes several minutes more). make test
# covers the default version's image; the GitHub Actions matrix runs make test per version.
test-kind-older: kind-image kind-image-older
	KTEST_OLDER_K8S_VERSION=$(OLDER_K8S_VERSION) $(BIN)/python -m pytest tests/kind_machinery $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)

# The dependency floors, proven: every dependency at the lowest version pyproject.toml allows
# (scripts/ci/lowest-constraints pins each `>=X` to `==X`), in its own virtual environment,
# on the tests that exercise what the dependencies do: the kubernetes client (tests/cluster: CRUD,
# CRD parsing, manifests, Retry-After), tenacity (tests/wait, but the API server restarts of
# test_wakeup), the kopf runner and the client's defaults, finalizers, the proxy's HTTP parsing and
# TLS (h2, cryptography), the public API's imports.
FLOORS_VENV := .venv-floors
FLOORS_TESTS ?= tests/test_public_api.py tests/cluster tests/wait --ignore=tests/wait/test_wakeup.py \
	tests/assertions/test_assert_finalizers.py tests/operators/test_operators_kopf.py \
	tests/operators/test_operators_client_defaults.py tests/proxy/test_forwarding.py \
	tests/proxy/test_request_smuggling.py
test-floors: venv binaries
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_VENV)/bin/pip install --quiet --upgrade pip
	$(BIN)/python scripts/ci/lowest-constraints > $(FLOORS_VENV)/constraints.txt
	$(FLOORS_VENV)/bin/pip install --quiet -c $(FLOORS_VENV)/constraints.txt -e '.[kopf,xdist,test]'
	$(FLOORS_VENV)/bin/pip check
	$(FLOORS_VENV)/bin/python -m pip freeze --exclude-editable | grep -i -E "^(kubernetes|urllib3|kopf|pytest|tenacity|pyyaml|cryptography|filelock|h2)=="
	$(FLOORS_VENV)/bin/python -m pytest -n $(TEST_WORKERS) -p no:cacheprovider $(FLOORS_TESTS) $(PYTEST_ARGS)

# The demo suite includes an in-place upgrade from the older minor (examples/test_upgrade.py), so it
# obtains both minors' binaries.
demo: venv binaries node-tools binaries-older
	$(BIN)/python -m pytest examples $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)

# The example project (examples/memcached-kopf) as a user runs it: ktest's wheel and the example
# installed into a fresh virtual environment, its own tests, then mypy --strict on it.
.PHONY: test-example
test-example: venv binaries
	BIN=$(BIN) PYTHON=$(PYTHON) scripts/ci/example-project $(if $(K8S_VERSION),--ktest-k8s-version $(K8S_VERSION),) $(PYTEST_ARGS)

# The documentation site (mkdocs.yml), built strictly into site/: a broken link, a missing page or a
# reference entry the code no longer has fails. Its code blocks run in tests/docs.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The reference pages' plain-Markdown copy for readers on GitHub (docs/reference/*.md, written from
# the code; tests/docs/test_docs_reference.py fails when it is out of date).
reference: venv
	$(BIN)/python scripts/reference_pages.py

lint: venv
	$(BIN)/ruff check ktest tests fixtures bench examples offline
	$(BIN)/mypy ktest
	$(BIN)/mypy offline/ktest_offline

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

# A headless Chromium for the timeline's browser tests (tests/timeline/browser): Debian's chromium
# package (root, apt-get), driven by Playwright from the dev extra. Idempotent.
browser:
	scripts/browser

# Offline kind node images for K8S_VERSION and OLDER_K8S_VERSION (cold: Go builds and debootstrap,
# tens of minutes; warm: a label check of seconds). Each one alone: kind-image, kind-image-older.
kind-images: kind-image kind-image-older

kind-image: venv docker-engine binaries
	$(KTEST) kind build-image $(VERSION_FLAG)

kind-image-older: venv docker-engine binaries-older
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
