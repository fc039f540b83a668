"""Against a real API server: a malformed or oversized CRD is named (file,
document, field and line; size and limit) before anything is sent, so nothing is installed, and
a request body over the API server's limit is refused unsent instead of ending, seconds later,
in a MaxRetryError. The shapes themselves are catalogued in
tests/hardening/test_bad_input_catalogue.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from builders import configmap, crd

from ktest.cluster import Cluster
from ktest.errors import CRDError
from ktest.errors.api import ApiError
from ktest.proxy import OperatorProxy

GROUP = "crdinput.ktest.dev"


def _installed(admin: Cluster, name: str) -> bool:
    return admin.exists(("apiextensions.k8s.io/v1", "CustomResourceDefinition", name))


def test_a_malformed_crd_in_the_last_file_installs_none(admin: Cluster, tmp_path: Path) -> None:
    good = crd(GROUP, "Alpha")
    broken = crd(GROUP, "Beta")
    del broken["spec"]["versions"][0]["name"]
    (tmp_path / "a-alpha.yaml").write_text(yaml.safe_dump(good, sort_keys=False))
    (tmp_path / "b-beta.yaml").write_text(yaml.safe_dump(broken, sort_keys=False))
    line = next(
        number
        for number, text in enumerate((tmp_path / "b-beta.yaml").read_text().splitlines(), 1)
        if text.lstrip().startswith("- served:")
    )
    with pytest.raises(CRDError) as caught:
        admin.install_crds(tmp_path)
    message = str(caught.value)
    assert f"{tmp_path / 'b-beta.yaml'}, document 1 (line 1)" in message
    assert (
        f"CustomResourceDefinition betas.{GROUP}: spec.versions[0].name (line {line}) is missing" in message
    )
    assert caught.value.__context__ is None or caught.value.__suppress_context__, (
        "a KeyError would be chained"
    )
    assert not _installed(admin, f"alphas.{GROUP}"), "the good CRD before it was installed"
    assert not _installed(admin, f"betas.{GROUP}")
    admin.install_crds(tmp_path / "a-alpha.yaml")  # positive control: the same helper, a good file
    assert _installed(admin, f"alphas.{GROUP}")
    admin.delete(("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"alphas.{GROUP}"))


def _with_field(field: bytes) -> bytes:
    """A good CRD with one more top-level field, ``field`` (a line of YAML)."""
    return yaml.safe_dump(crd(GROUP, "Bad"), sort_keys=False).encode() + field


def _deeply_nested(depth: int) -> bytes:
    """A CRD with a top-level field holding ``depth`` mappings, one in the other (block style)."""
    text = yaml.safe_dump(crd(GROUP, "Deep"), sort_keys=False) + "x:\n"
    text += "".join("  " * (level + 1) + f"k{level}:\n" for level in range(depth))
    text += "  " * (depth + 1) + "v: 1\n"
    return text.encode()


# Issue 50.7: shapes that escaped as raw exceptions; the deep mapping only part-way through the
# install, after the good CRD before it had been created.
MALFORMED_FILES = {
    "not-utf8": (b"apiVersion: apiextensions.k8s.io/v1\nkind: \xff\n", "line 2: not UTF-8 text"),
    "binary": (bytes(range(128)) * 4, "control character U+0000"),
    "python-tag": (_with_field(b"x: !!python/object/apply:os.system [true]\n"), "not plain YAML"),
    "unknown-tag": (_with_field(b"x: !custom 3\n"), "the tag !custom is not plain YAML"),
    "complex-key": (_with_field(b"? [a, b]\n: c\n"), "a mapping key that is a list"),
    "long-integer": (_with_field(b"x: " + b"9" * 5000 + b"\n"), "an integer of 5,000 characters"),
    "deep-flow-sequence": (
        _with_field(b"x: " + b"[" * 990 + b"]" * 990 + b"\n"),
        "nested more than 200 levels deep",
    ),
    "deep-mapping": (
        _deeply_nested(900),
        "nested more than 200 levels deep",
    ),
}


@pytest.mark.parametrize("shape", list(MALFORMED_FILES))
def test_a_malformed_crd_file_is_one_crd_error_before_anything_is_installed(
    admin: Cluster, tmp_path: Path, shape: str
) -> None:
    data, said = MALFORMED_FILES[shape]
    (tmp_path / "a-sound.yaml").write_text(yaml.safe_dump(crd(GROUP, "Sound"), sort_keys=False))
    (tmp_path / "b-bad.yaml").write_bytes(data)
    with pytest.raises(CRDError) as caught:
        admin.install_crds(tmp_path)
    message = str(caught.value)
    assert f"{tmp_path / 'b-bad.yaml'}" in message and said in message, message
    assert caught.value.__context__ is None or caught.value.__suppress_context__
    assert not _installed(admin, f"sounds.{GROUP}"), "the good CRD before it was installed"


@pytest.fixture
def recorded(admin: Cluster) -> Iterator[OperatorProxy]:
    """The admin through a recording proxy: ``recorded.cluster`` sends, ``recorded.traffic`` says
    what reached the proxy (nothing else uses this client, so every call there is the test's)."""
    proxy = OperatorProxy(admin, "crd-input").start()
    try:
        yield proxy
    finally:
        proxy.close()


def _sent(proxy: OperatorProxy, resource: str) -> list[str]:
    """The calls of ``resource`` that reached the proxy, as text for a failure message."""
    return [call.describe() for call in proxy.traffic.calls(resource=resource)]


@pytest.mark.slow
def test_an_oversized_crd_is_named_with_its_size_and_the_limit_at_once(
    recorded: OperatorProxy, admin: Cluster, tmp_path: Path
) -> None:
    big = crd(GROUP, "Huge", schema={"type": "object", "description": "x" * (4 << 20)})
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(big, sort_keys=False, width=1 << 30))
    with pytest.raises(CRDError) as caught:
        recorded.cluster.install_crds(path)
    message = str(caught.value)
    for fragment in (str(path), "document 1", f"huges.{GROUP}", "4.0 MiB", "3.0 MiB (3145728 bytes)"):
        assert fragment in message, message
    # At once: refused before sending (sent, it took 4-18 s of retries, then a MaxRetryError).
    assert not _sent(recorded, "customresourcedefinitions"), "the oversized CRD was sent"
    assert not _installed(admin, f"huges.{GROUP}")
    recorded.cluster.install_crds(crd(GROUP, "Small"))  # positive control: the proxy records a CRD sent
    assert _sent(recorded, "customresourcedefinitions")
    admin.delete(("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"smalls.{GROUP}"))


def test_a_crd_over_the_storage_limit_says_so(admin: Cluster) -> None:
    """Under the request limit but over what etcd stores: the API server's refusal, with the size."""
    big = crd(GROUP, "Large", schema={"type": "object", "description": "x" * (2 << 20)})
    with pytest.raises(CRDError) as caught:
        admin.install_crds(big)
    message = str(caught.value)
    for fragment in (f"rejected CustomResourceDefinition larges.{GROUP}", "2.0 MiB", "1.5 MiB", "maxDescLen"):
        assert fragment in message, message


def test_a_body_over_the_request_limit_is_refused_unsent(
    recorded: OperatorProxy, admin: Cluster, ns: str
) -> None:
    big = configmap("big", ns, data={"k": "x" * (20 << 20)})
    with pytest.raises(ApiError) as caught:
        recorded.cluster.apply(big)
    assert caught.value.status == 413
    assert "not sent" in str(caught.value) and "3.0 MiB (3145728 bytes)" in str(caught.value)
    assert not _sent(recorded, "configmaps"), "the oversized body was sent"
    assert not admin.exists(("v1", "ConfigMap", "big", ns))
    # positive control: a body that fits is sent, and the proxy records it
    recorded.cluster.apply(configmap("big", ns, data={"k": "x" * (512 << 10)}))
    assert _sent(recorded, "configmaps")


def test_a_connection_reset_while_sending_a_large_body_says_why(
    admin: Cluster, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ktest's own check (raised here), the real API server closes the connection on a
    20 MiB body, or answers 413: said as a refusal of its size with the fix, not a MaxRetryError."""
    import urllib3

    from ktest.cluster import rest

    monkeypatch.setattr(rest, "MAX_REQUEST_BODY_BYTES", 100 << 20)
    monkeypatch.setattr(rest, "_CONNECTION_RETRIES", urllib3.Retry(0, respect_retry_after_header=False))
    with pytest.raises(ApiError) as caught:
        admin.apply(configmap("huge", ns, data={"k": "x" * (20 << 20)}))
    message = str(caught.value)
    assert caught.value.status == 413, message
    # The server either closes the connection mid-body or reads it and answers 413 (a race on its
    # side): both are said as a refusal of the body's size, with the fix.
    said = ("closed the connection while a 20.0 MiB", "refused a 20.0 MiB")
    assert any(text in message for text in said) and "make the object smaller" in message, message
    assert caught.value.__context__ is None or caught.value.__suppress_context__
