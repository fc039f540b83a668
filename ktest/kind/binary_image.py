"""A minimal container image from one static binary (a Go operator, a test server), without a registry.

``FROM scratch`` + the binary: Docker's classic builder needs nothing it
would have to pull, so this works offline. Use it to run a Go
controller-runtime manager in a kind cluster::

    binary = ktest.operators.build_go_binary("path/to/manager")   # CGO_ENABLED=0: static
    image = image_from_binary(binary, "my-operator:dev")
    kind.deploy_operator(image, "config/default")

Rebuilding with the same binary and arguments is a no-op (Docker's build cache).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ktest.errors import KindError


def image_from_binary(
    binary: Path | str,
    tag: str,
    *,
    args: Sequence[str] = (),
    user: str = "65532:65532",
    labels: dict[str, str] | None = None,
) -> str:
    """Build image ``tag`` holding ``binary`` as its entrypoint; returns the tag."""
    from docker.errors import BuildError, DockerException

    from ktest.kind.engine import connect

    binary = Path(binary)
    if not binary.is_file():
        raise KindError(f"image_from_binary: {binary} is not a file; build the binary first")
    if ":" not in tag.rsplit("/", 1)[-1] or tag.endswith(":latest"):
        raise KindError(
            f"image_from_binary: give {tag!r} a version tag other than latest "
            f"(e.g. {tag.split(':')[0]}:dev): "
            "a :latest image would be pulled by the kubelet instead of used from the node"
        )
    name = binary.name
    with tempfile.TemporaryDirectory(prefix="ktest-image-") as context:
        shutil.copy2(binary, Path(context) / name)
        label_lines = "".join(f"LABEL {json.dumps(k)}={json.dumps(v)}\n" for k, v in (labels or {}).items())
        (Path(context) / "Dockerfile").write_text(
            "FROM scratch\n"
            f"COPY {name} /{name}\n"
            f"USER {user}\n"
            f"{label_lines}"
            f"ENTRYPOINT {json.dumps([f'/{name}', *args])}\n"
        )
        try:
            connect().images.build(path=context, tag=tag, rm=True, forcerm=True)
        except BuildError as error:
            log = "".join(str(chunk.get("stream", "")) for chunk in error.build_log)
            raise KindError(f"building image {tag} from {binary} failed: {error}\n{log[-2000:]}") from error
        except DockerException as error:
            raise KindError(f"building image {tag} from {binary} failed: {error}") from error
    return tag
