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

    from ktest.backends.kind.engine import connect

    if ":" not in tag.rsplit("/", 1)[-1] or tag.endswith(":latest"):
        raise KindError(
            f"image_from_binary: give {tag!r} a version tag other than latest "
            f"(e.g. {tag.split(':')[0]}:dev): "
            "a :latest image would be pulled by the kubelet instead of used from the node"
        )
    binary = Path(binary)
    if not binary.is_file():
        raise KindError(f"image_from_binary: {binary} is not a file; build the binary first")
    interpreter = elf_interpreter(binary)
    if interpreter is not None:
        raise KindError(
            f"image_from_binary: {binary} is dynamically linked (it needs {interpreter}), but the image "
            "has nothing but the binary. Build it static: CGO_ENABLED=0 go build, or "
            "ktest.operators.build_go_binary(..., reproducible=True)"
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


def elf_interpreter(path: Path) -> str | None:
    """The dynamic loader an ELF executable asks for (PT_INTERP), None for a static one or non-ELF."""
    import struct

    with path.open("rb") as file:
        header = file.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2:  # 64-bit ELF only
            return None
        order = "<" if header[5] == 1 else ">"
        phoff, = struct.unpack_from(order + "Q", header, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 54)
        for index in range(phnum):
            file.seek(phoff + index * phentsize)
            entry = file.read(phentsize)
            p_type, = struct.unpack_from(order + "I", entry, 0)
            if p_type == 3:  # PT_INTERP
                offset, = struct.unpack_from(order + "Q", entry, 8)
                size, = struct.unpack_from(order + "Q", entry, 32)
                file.seek(offset)
                return file.read(size).rstrip(b"\0").decode(errors="replace")
    return None
