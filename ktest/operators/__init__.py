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

from ktest.lazy import lazy_attributes

_NAMES_BY_MODULE = {
    "handle": ("OperatorHandle", "ExpectedCrash"),
    "inprocess": ("OperatorContext", "CallableOperator", "run_callable"),
    "kopf_runner": ("KopfOperator", "run_kopf"),
    "process_runner": ("ProcessOperator", "run_subprocess"),
    "rbac": ("OperatorIdentity", "operator_identity", "load_roles"),
    "gobuild": ("build_go_binary", "plan_go_build"),
    "run_threads": ("OperatorCrash",),
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


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
