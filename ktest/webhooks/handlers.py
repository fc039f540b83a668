"""Webhooks written as Python functions, for users without a webhook framework.

::

    handlers = ktest.webhooks.Handlers()

    @handlers.validate("example.com", "v1", "widgets")
    def replicas_in_range(request):
        if request.object["spec"].get("replicas", 1) > 10:
            raise ktest.webhooks.Denied("spec.replicas must be at most 10")

    @handlers.mutate("example.com", "v1", "widgets")
    def default_replicas(request):
        request.object["spec"].setdefault("replicas", 1)      # or return a new object

    @handlers.convert("example.com", "widgets")
    def convert(obj, to_version):
        ...                                                   # return the object in to_version

Registration generates the webhook configuration (served through a pretend
Service that :mod:`ktest.webhooks.manifests` rewrites like any other), so the
API server calls these exactly as it would call a real server.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from typing_extensions import Unpack

AdmissionHandler = Callable[["AdmissionRequest"], Any]

PYTHON_SERVICE = "ktest-python-handlers"
"""The pretend Service of the configurations generated for Python handlers (``manifests``
recognises it and points such webhooks at ktest's front server)."""
ConversionHandler = Callable[[dict[str, Any], str], dict[str, Any]]


class Denied(Exception):
    """Raised by a validating (or mutating) handler to reject the request with ``message``."""

    def __init__(self, message: str, *, code: int = 403, reason: str = "Forbidden") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason


@dataclass
class AdmissionRequest:
    """The ``request`` of an AdmissionReview v1, with the object ready to read (or change)."""

    raw: dict[str, Any]
    object: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.object = copy.deepcopy(self.raw.get("object") or {})

    @property
    def old_object(self) -> dict[str, Any] | None:
        return self.raw.get("oldObject")

    @property
    def operation(self) -> str:
        return str(self.raw.get("operation", ""))

    @property
    def namespace(self) -> str | None:
        return self.raw.get("namespace")

    @property
    def name(self) -> str:
        return str(self.raw.get("name") or (self.object.get("metadata") or {}).get("name") or "")

    @property
    def user(self) -> str:
        return str((self.raw.get("userInfo") or {}).get("username", ""))

    @property
    def dry_run(self) -> bool:
        return bool(self.raw.get("dryRun"))


@dataclass(frozen=True)
class Registration:
    kind: str  # validating, mutating, conversion
    function: Callable[..., Any]
    group: str
    version: str
    plural: str
    operations: tuple[str, ...]
    failure_policy: str

    @property
    def path(self) -> str:
        return f"/python/{self.kind}/{self.group}/{self.version}/{self.plural}/{self.function.__name__}"

    @property
    def webhook_name(self) -> str:
        name = self.function.__name__.replace("_", "-").strip("-").lower() or "handler"
        return f"{name}.{self.plural}.{self.group or 'core'}"

    @property
    def client_config(self) -> dict[str, Any]:
        """The pretend Service reference of generated configurations (see ``PYTHON_SERVICE``)."""
        return {"service": {"name": PYTHON_SERVICE, "namespace": "ktest", "path": self.path}}


class AdmissionOptions(TypedDict, total=False):
    """``operations`` (default CREATE and UPDATE) and ``failure_policy`` (``"Fail"``, the default,
    or ``"Ignore"``) of an admission handler."""

    operations: Sequence[str]
    failure_policy: str


class Handlers:
    """A registry of Python webhook handlers (decorators); pass it to ``Webhooks(handlers=...)``."""

    def __init__(self) -> None:
        self.registrations: list[Registration] = []

    def validate(
        self, group: str, version: str, plural: str, **options: Unpack[AdmissionOptions]
    ) -> Callable[[AdmissionHandler], AdmissionHandler]:
        """Register ``f(request)``: returning ends in "allowed", ``raise Denied(message)`` rejects."""
        return self._register("validating", group, version, plural, **options)

    def mutate(
        self, group: str, version: str, plural: str, **options: Unpack[AdmissionOptions]
    ) -> Callable[[AdmissionHandler], AdmissionHandler]:
        """Register ``f(request)``: change ``request.object`` in place or return the new object."""
        return self._register("mutating", group, version, plural, **options)

    def convert(self, group: str, plural: str) -> Callable[[ConversionHandler], ConversionHandler]:
        """Register ``f(obj, to_version) -> obj`` as the conversion webhook of CRD ``plural.group``."""
        return self._register("conversion", group, "", plural, operations=(), failure_policy="-")

    def _register(
        self,
        kind: str,
        group: str,
        version: str,
        plural: str,
        *,
        operations: Sequence[str] = ("CREATE", "UPDATE"),
        failure_policy: str = "Fail",
    ) -> Callable[[Any], Any]:
        if failure_policy not in ("Fail", "Ignore", "-"):
            raise ValueError(f"failure_policy must be 'Fail' or 'Ignore', not {failure_policy!r}")

        def register(function: Any) -> Any:
            registration = Registration(
                kind, function, group, version, plural, tuple(operations), failure_policy
            )
            if any(r.path == registration.path for r in self.registrations):
                raise ValueError(
                    f"{function.__name__} is already registered as a {kind} handler of {plural}.{group}"
                )
            self.registrations.append(registration)
            return function

        return register

    def by_path(self) -> dict[str, Registration]:
        return {r.path: r for r in self.registrations}

    def admission_configurations(self) -> list[dict[str, Any]]:
        """Webhook configurations for the admission handlers (at most one of each kind)."""
        configs = []
        for kind, config_kind in (
            ("mutating", "MutatingWebhookConfiguration"),
            ("validating", "ValidatingWebhookConfiguration"),
        ):
            webhooks = [
                {
                    "name": r.webhook_name,
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": r.failure_policy,
                    "clientConfig": r.client_config,
                    "rules": [
                        {
                            "apiGroups": [r.group],
                            "apiVersions": [r.version],
                            "resources": [r.plural],
                            "operations": list(r.operations),
                        }
                    ],
                }
                for r in self.registrations
                if r.kind == kind
            ]
            if webhooks:
                configs.append(
                    {
                        "apiVersion": "admissionregistration.k8s.io/v1",
                        "kind": config_kind,
                        "metadata": {"name": f"ktest-python-{kind}"},
                        "webhooks": webhooks,
                    }
                )
        return configs

    def conversions(self) -> list[Registration]:
        return [r for r in self.registrations if r.kind == "conversion"]


def answer_admission(registration: Registration, request: AdmissionRequest) -> dict[str, Any]:
    """The AdmissionReview ``response`` for ``request`` from a Python handler (exceptions propagate)."""
    response: dict[str, Any] = {"uid": request.raw.get("uid"), "allowed": True}
    try:
        result = registration.function(request)
    except Denied as denial:
        response["allowed"] = False
        response["status"] = {"code": denial.code, "reason": denial.reason, "message": denial.message}
        return response
    if registration.kind == "mutating":
        after = result if isinstance(result, dict) else request.object
        operations = json_patch(request.raw.get("object") or {}, after)
        if operations:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(operations).encode()).decode("ascii")
    return response


def answer_conversion(registration: Registration, request: dict[str, Any]) -> dict[str, Any]:
    """The ConversionReview ``response``: every object converted to ``desiredAPIVersion``."""
    desired = str(request["desiredAPIVersion"])
    to_version = desired.rsplit("/", 1)[-1]
    converted = []
    for obj in request.get("objects") or ():
        if obj.get("apiVersion") == desired:
            converted.append(obj)
            continue
        result = registration.function(copy.deepcopy(obj), to_version)
        result["apiVersion"] = desired
        converted.append(result)
    return {"uid": request.get("uid"), "convertedObjects": converted, "result": {"status": "Success"}}


def json_patch(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations turning ``before`` into ``after`` (maps recursively, lists whole)."""
    if isinstance(before, dict) and isinstance(after, dict):
        operations: list[dict[str, Any]] = [
            {"op": "remove", "path": f"{path}/{_escape(key)}"} for key in before if key not in after
        ]
        for key, value in after.items():
            child = f"{path}/{_escape(key)}"
            if key not in before:
                operations.append({"op": "add", "path": child, "value": value})
            else:
                operations.extend(json_patch(before[key], value, child))
        return operations
    if before == after and type(before) is type(after):
        return []
    return [{"op": "replace", "path": path, "value": after}]


def _escape(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")
