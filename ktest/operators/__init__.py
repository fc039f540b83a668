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

_EXPORTS = {
    "OperatorHandle": "ktest.operators.handle",
    "OperatorContext": "ktest.operators.inprocess",
    "CallableOperator": "ktest.operators.inprocess",
    "run_callable": "ktest.operators.inprocess",
    "KopfOperator": "ktest.operators.kopf_runner",
    "run_kopf": "ktest.operators.kopf_runner",
    "ProcessOperator": "ktest.operators.process_runner",
    "run_subprocess": "ktest.operators.process_runner",
    "OperatorIdentity": "ktest.operators.rbac",
    "operator_identity": "ktest.operators.rbac",
    "load_roles": "ktest.operators.rbac",
    "build_go_binary": "ktest.operators.gobuild",
    "plan_go_build": "ktest.operators.gobuild",
    "ExpectedCrash": "ktest.operators.handle",
    "OperatorCrash": "ktest.operators.run_threads",
    "namespace_for": "ktest.operators.pytest_fixtures",
    "operator_for_test": "ktest.operators.pytest_fixtures",
    "finalize_namespace": "ktest.operators.pytest_fixtures",
    "finalize_cluster_objects": "ktest.operators.pytest_fixtures",
    "Denial": "ktest.operators.denials",
    "find_denials": "ktest.operators.denials",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
