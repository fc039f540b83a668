"""Run the operator under test: a Python callable (thread or asyncio), kopf, or any command.

Every kind returns an :class:`OperatorHandle` (``stop``, ``crash``, ``restart``,
``logs``, ``alive``, ``wait_ready``, ``error``), a context manager that stops the
operator on exit and reports its failures to the test run::

    with run_callable(main, cluster) as op:            # main(ctx): ctx.kubeconfig, ctx.stop, ctx.ready()
    with run_kopf("my_op.handlers", cluster, namespaces=[ns]) as op:
    with run_subprocess([build_go_binary("./"), "--health-probe-bind-address=127.0.0.1:{port}"],
                        cluster, ready_http="http://127.0.0.1:{port}/readyz") as op:

Least privilege: ``with operator_identity(cluster, "config/rbac/role.yaml") as me:``
then run the operator with ``me.cluster``; a request its role lacks fails the
test naming the verb and resource. Fixture patterns (``operator_for_test`` for an operator
per test, ``namespace_for`` for a namespace per test): ``ktest.operators.pytest_fixtures``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.operators.crash_expectation import ExpectedCrash as ExpectedCrash
    from ktest.operators.denials import Denial as Denial
    from ktest.operators.denials import find_denials as find_denials
    from ktest.operators.go_operator import build_go_binary as build_go_binary
    from ktest.operators.go_operator import plan_go_build as plan_go_build
    from ktest.operators.inprocess import CallableOperator as CallableOperator
    from ktest.operators.inprocess import OperatorContext as OperatorContext
    from ktest.operators.inprocess import run_callable as run_callable
    from ktest.operators.kopf.runner import KopfOperator as KopfOperator
    from ktest.operators.kopf.runner import run_kopf as run_kopf
    from ktest.operators.operator import OperatorHandle as OperatorHandle
    from ktest.operators.process_runner import ProcessOperator as ProcessOperator
    from ktest.operators.process_runner import run_subprocess as run_subprocess
    from ktest.operators.pytest_fixtures import finalize_cluster_objects as finalize_cluster_objects
    from ktest.operators.pytest_fixtures import finalize_namespace as finalize_namespace
    from ktest.operators.pytest_fixtures import namespace_for as namespace_for
    from ktest.operators.pytest_fixtures import operator_for_test as operator_for_test
    from ktest.operators.rbac import OperatorIdentity as OperatorIdentity
    from ktest.operators.rbac import load_roles as load_roles
    from ktest.operators.rbac import operator_identity as operator_identity
    from ktest.operators.threads import OperatorCrash as OperatorCrash

_NAMES_BY_MODULE = {
    "operator": ("OperatorHandle",),
    "crash_expectation": ("ExpectedCrash",),
    "inprocess": ("OperatorContext", "CallableOperator", "run_callable"),
    "kopf.runner": ("KopfOperator", "run_kopf"),
    "process_runner": ("ProcessOperator", "run_subprocess"),
    "rbac": ("OperatorIdentity", "operator_identity", "load_roles"),
    "go_operator": ("build_go_binary", "plan_go_build"),
    "threads": ("OperatorCrash",),
    "pytest_fixtures": (
        "namespace_for",
        "operator_for_test",
        "finalize_namespace",
        "finalize_cluster_objects",
    ),
    "denials": ("Denial", "find_denials"),
}
_EXPORTS = {name: f"ktest.operators.{module}" for module, names in _NAMES_BY_MODULE.items() for name in names}

__all__ = sorted(_EXPORTS)


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
