"""Backend kind's part of the workflow ``ktest init github-actions`` writes (its ``ci_steps``):
install the ``kind`` extra, the kind binary and the node image (cached by kind release and
Kubernetes release), and upload the kind logs of a failed run."""

from __future__ import annotations

from ktest.backends.kind.recipe import KIND_VERSION
from ktest.extension import CiContext, CiSteps

NAME = "kind"


def ci_steps(context: CiContext) -> CiSteps:
    """The registry's ``ci_steps``: what a kind cell of the matrix adds."""
    only_here = f"        if: matrix.backend == '{NAME}'"
    return CiSteps(
        extra="kind",
        before_tests=(
            "      - name: kind",
            only_here,
            "        run: ktest kind install",
            f"      - uses: {context.cache_action}",
            only_here,
            "        with:",
            "          path: ~/.cache/ktest-ci/node-image.tar",
            f"          key: ktest-kind-node-{context.platform}-kind{KIND_VERSION}-k8s{context.release}",
            "      - name: kind node image (loaded from the cache, else pulled and archived for it)",
            only_here,
            "        run: |",
            '          image="kindest/node:v$KTEST_K8S_VERSION"',
            "          archive=~/.cache/ktest-ci/node-image.tar",
            '          if [ -f "$archive" ]; then',
            '            docker load --input "$archive"',
            "          else",
            '            docker pull "$image"',
            '            mkdir -p "$(dirname "$archive")"',
            '            docker save --output "$archive" "$image"',
            "          fi",
        ),
        after_failure=(
            "      - name: Upload the kind logs of a failed run",
            f"        if: failure() && matrix.backend == '{NAME}'",
            f"        uses: {context.upload_action}",
            "        with:",
            "          name: kind-logs-${{ matrix.backend }}-${{ matrix.k8s-version }}",
            "          path: .ktest-artifacts/kind-logs/",
            "          if-no-files-found: ignore",
        ),
    )
