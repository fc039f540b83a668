"""Assertions for CRD version evolution: conversion that loses nothing, and the version etcd
really stores (the API server answers in whatever version is asked for, so only etcd can say).
:func:`ktest.assertions.assert_converts` checks the converted form itself."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ktest.assertions.changes import round_trip_changes, round_trip_wording
from ktest.assertions.objects import describe, failure
from ktest.cluster.refs import ObjectRef, RefLike, as_ref
from ktest.errors.api import ApiError
from ktest.wait.match import diff

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster
    from ktest.crd_versions.evolution import EtcdAccess

_ROUND_TRIP_RULE = (
    "conversion between served versions must be lossless: an object converted to another version "
    "and back holds every field it held (a field one version lacks is kept, e.g. in an annotation)"
)
_STORED_RULE = (
    "the API server stores an object in the CRD's storage version only when the object is written; "
    "objects written before the storage version changed stay in the old one until rewritten "
    "(ktest.cluster.migrate_storage)"
)


def assert_round_trips(cluster: Cluster, obj: RefLike, via: str) -> dict[str, Any]:
    """``obj`` (at its own version, e.g. v1alpha1) read at version ``via`` (e.g. ``"v1"``),
    written back at ``via`` and read at its own version again is what it was: the failure names
    each field lost, changed or added. Returns the object as read at ``via``.

    Pass the object as the test sent it (a dict with its ``spec``) to check that spec too:
    an object created at a version other than the storage version was converted once on
    the way in, and a field lost there is named as well.

    The write-back is a real update (as an operator of the newer version would make): a lossy
    conversion really loses the field, as it would in production.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    group, _, from_version = ref.api_version.rpartition("/")
    via_ref = ObjectRef(f"{group}/{via}" if group else via, ref.kind, ref.name, ref.namespace)
    original = cluster.get(ref)
    headline = (
        f"{describe(original)} did not survive the round trip {from_version} -> {via} -> {from_version}"
    )
    try:
        converted = cluster.get(via_ref)
        cluster.update(converted, field_manager="ktest-round-trip")
    except ApiError as error:
        raise AssertionError(
            failure(
                headline, _ROUND_TRIP_RULE, f"the API server refused the object at {via}: {error.message}"
            )
        ) from None
    back = cluster.get(ref)
    changes = round_trip_changes(original, back)
    if isinstance(obj, Mapping) and isinstance(obj.get("spec"), Mapping):
        # the object as the test sent it: a field lost on the way in (created at an older
        # version than the storage version, converted once already) is lost too
        sent = [f"{round_trip_wording(line)} (as sent)" for line in diff(back, {"spec": obj["spec"]})]
        changes += [line for line in sent if line.removesuffix(" (as sent)") not in changes]
    if changes:
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        raise AssertionError(
            failure(
                f"{headline}: {changes[0]}{more}",
                _ROUND_TRIP_RULE,
                [*changes, f"at {via} it read: spec {converted.get('spec')}"],
            )
        )
    return converted


def assert_stored_as(cluster: Cluster, obj: RefLike, version: str, *, etcd: EtcdAccess | None = None) -> str:
    """``obj`` is stored in etcd at ``version`` (``"v1"`` or ``"group/v1"``), read from etcd
    itself; returns the stored apiVersion.

    ``etcd``: the :class:`~ktest.controlplane.ControlPlane` (the ``control_plane`` fixture) or
    an :class:`~ktest.crd_versions.etcd_reads.EtcdReader`. Only the bare backend's control
    plane, in the process running the tests, gives access to etcd: on kind and existing
    clusters ktest cannot read etcd, and this refuses with the reason.
    """
    __tracebackhide__ = True
    if etcd is None:
        raise TypeError(
            "assert_stored_as reads etcd, and needs etcd=: the ControlPlane (the control_plane fixture; "
            "the bare backend in this process, without --ktest-reuse or pytest-xdist). On the kind and "
            "existing backends ktest has no access to etcd, so it cannot say in which version an object "
            "is stored (the API server answers in whatever version is asked for)."
        )
    from ktest.crd_versions.etcd_reads import custom_resource_key
    from ktest.crd_versions.evolution import etcd_reader

    ref = as_ref(obj)
    group = ref.api_version.rpartition("/")[0]
    info = cluster.info(ref.api_version, ref.kind)
    if not group:
        raise TypeError(f"assert_stored_as reads custom resources; {ref.kind} ({ref.api_version}) is not one")
    key = custom_resource_key(group, info.plural, ref.namespace if info.namespaced else None, ref.name)
    wanted = version if "/" in version else f"{group}/{version}"
    reader = etcd_reader(etcd)
    value = reader.get(key)
    what = f"{ref.kind} {ref.namespace + '/' if ref.namespace else ''}{ref.name}"
    if value is None:
        raise AssertionError(failure(f"{what} is not in etcd", _STORED_RULE, f"no key {reader.prefix}{key}"))
    try:
        stored = json.loads(value).get("apiVersion")
    except ValueError:
        stored = None
    if stored != wanted:
        raise AssertionError(
            failure(
                f"{what} is stored in etcd as {stored}, not {wanted}",
                _STORED_RULE,
                f"etcd key {reader.prefix}{key} holds apiVersion {stored!r}",
            )
        )
    return str(stored)
