"""The exceptions ktest raises.

Every error says what was wrong, why, and how to fix it; the hierarchy lets
callers catch one family (``except ktest.AssetsError``) or all of them.
``ApiError`` (a ``ClusterError`` that is also the official client's
``ApiException``) lives in the submodule ``ktest.errors.api``, so that this
module, which the CLI and the control plane use, never imports the kubernetes
package; ``from ktest.errors import ApiError`` still works, with a DeprecationWarning.
"""

from __future__ import annotations

from ktest.lazy import moved_attributes


class KtestError(Exception):
    """Base class of every error ktest raises on purpose."""


class AssetsError(KtestError):
    """Control-plane binaries could not be found, downloaded or built."""


class ControlPlaneError(KtestError):
    """A control-plane component failed to start, stay up or stop."""


class ClusterError(KtestError):
    """A request to the cluster failed in a way the caller must fix."""


class ManifestError(KtestError):
    """A manifest (file, YAML string or dict) is not a valid Kubernetes object."""


class CRDError(KtestError):
    """A CustomResourceDefinition could not be installed or never became served."""


class OperatorError(KtestError):
    """The operator under test failed to start, crashed, or raised."""


class ConfigError(KtestError):
    """A ktest setting (option, ini key or environment variable) is invalid."""


class KindError(KtestError):
    """The Docker engine, the kind binary, a kind node image or a kind cluster is not usable."""


class WebhookError(KtestError):
    """Webhook manifests, certificates or servers are unusable, or the API server never called them."""


__getattr__ = moved_attributes(__name__, globals())
