"""The ``kubernetes`` package's process-wide defaults, routed to each in-process operator's proxy.

Operators configure the official client once (``load_kube_config()``, ``load_incluster_config()``,
kopf's default login) and then build clients with no argument. In a test process those defaults
lead nowhere or, worse, to the developer's ``~/.kube/config``. While an in-process operator runs,
its code (its threads, see ``threads``, and the import of its modules) sees instead: default
``Configuration``/``ApiClient`` objects of its own, loaded from its proxy kubeconfig; every
kubeconfig and in-cluster loader leading to that kubeconfig (noted once in its log); and
``os.environ["KUBECONFIG"]`` naming it. The C-level environment, which child processes inherit,
names the kubeconfig of the most recently started operator still running. The test's own code
sees the process's defaults; everything is restored when the last operator stops.
``kubernetes_asyncio`` is not routed (its operators read ``ctx.kubeconfig`` / ``memo.kubeconfig``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktest.base.environment_proxies import choose_proxy
from ktest.operators.threads import current_run

_VARIABLE = "KUBECONFIG"


@dataclass(eq=False)
class KubeRoute:
    """Where one operator run's ``kubernetes`` defaults lead: its proxy kubeconfig."""

    name: str
    kubeconfig: Path
    note: Callable[[str], None] = print
    """Writes a line to the operator's log (a redirected load is noted once)."""
    configuration: Any = None
    api_client: Any = None
    noted: set[str] = field(default_factory=set)

    def default_api_client(self, api_client_class: type) -> Any:
        """The run's default ``ApiClient`` (made, from its default configuration, on first use)."""
        if self.api_client is None:
            self.api_client = api_client_class()
        return self.api_client

    def default_configuration(self) -> Any:
        """The run's default ``Configuration`` (created from the proxy kubeconfig on first use)."""
        if self.configuration is None:
            self.configuration = self.load()
        return self.configuration

    def load(self, into: Any = None) -> Any:
        """Load the proxy kubeconfig into ``into`` (a new ``Configuration`` if None); return it."""
        from kubernetes.client import Configuration

        target = type.__call__(Configuration) if into is None else into
        assert patches.loader is not None  # a route is only used while the patches are installed
        loader = patches.loader(filename=str(self.kubeconfig))
        loader.load_and_set(target)
        choose_proxy(target, loader)  # the proxy listens on 127.0.0.1: never via HTTPS_PROXY
        return target

    def note_redirect(self, call: str) -> None:
        if call not in self.noted:
            self.noted.add(call)
            self.note(
                f"---- ktest: {call} in {self.name} loads the test cluster through ktest's proxy "
                f"({self.kubeconfig}), not the kubeconfig or service account it names ----"
            )


_importing: ContextVar[KubeRoute | None] = ContextVar("ktest_kube_route_importing", default=None)


def current_route() -> KubeRoute | None:
    """The route of the operator whose code is running now, or None (the test's own code)."""
    run = current_run()
    return run.kube if run is not None else _importing.get()


@contextlib.contextmanager
def importing(route: KubeRoute) -> Iterator[None]:
    """Route the calling thread while it imports an operator's modules (import-time
    ``load_kube_config()`` calls land on the operator's proxy)."""
    token = _importing.set(route)
    try:
        yield
    finally:
        _importing.reset(token)


class _RoutedEnviron(os._Environ):
    """``os.environ`` while routes are active: an operator reads its own ``KUBECONFIG``."""

    def __getitem__(self, key: str) -> str:
        if key == _VARIABLE:
            route = current_route()
            if route is not None:
                return str(route.kubeconfig)
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        keys = super().__iter__()
        if current_route() is None:
            return keys
        return iter([*(key for key in keys if key != _VARIABLE), _VARIABLE])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Patches:
    """The package-level replacements, installed while at least one route is active."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.routes: list[KubeRoute] = []
        self.saved: list[tuple[Any, str, Any]] = []
        self.environ_class: type | None = None
        self.c_value: str | None = None
        """The process's own C-level ``KUBECONFIG`` (None: unset), put back on uninstall."""
        self.loader: Callable[..., Any] | None = None
        """``kube_config._get_kube_config_loader`` as the package had it."""

    # ------------------------------------------------------------ activation

    def acquire(self, route: KubeRoute) -> None:
        with self.lock:
            if not self.routes:
                self._install()
            self.routes.append(route)
            os.putenv(_VARIABLE, str(route.kubeconfig))

    def release(self, route: KubeRoute) -> None:
        with self.lock:
            if route not in self.routes:
                return
            self.routes.remove(route)
            if self.routes:
                os.putenv(_VARIABLE, str(self.routes[-1].kubeconfig))
            else:
                self._uninstall()

    def _install(self) -> None:
        self.environ_class = type(os.environ)
        self.c_value = os.environ.get(_VARIABLE)
        os.environ.__class__ = _RoutedEnviron
        try:
            import kubernetes.client as client
            import kubernetes.config.incluster_config as incluster
            import kubernetes.config.kube_config as kube_config
        except ImportError:  # the operator does not use the official client
            return
        configuration, api_client = client.Configuration, client.ApiClient
        self._route(configuration, "set_default", lambda route, cls, default: setattr(
            route, "configuration", copy.deepcopy(default)))
        self._route(configuration, "get_default_copy", lambda route, cls: copy.deepcopy(
            route.default_configuration()))
        self._route(configuration, "get_default", lambda route, cls: route.default_configuration())
        self._route(api_client, "get_default", lambda route, cls: route.default_api_client(cls))
        self._route(api_client, "_get_default_or_new", lambda route, cls: (
            (route.api_client, False) if route.api_client is not None else (cls(), True)))
        self._route(api_client, "set_default", lambda route, cls, default: setattr(
            route, "api_client", default))
        self._route_loaders(kube_config, incluster)

    def _uninstall(self) -> None:
        for owner, attribute, value in reversed(self.saved):
            setattr(owner, attribute, value)
        self.saved.clear()
        self.loader = None
        if self.environ_class is not None:
            os.environ.__class__ = self.environ_class
            self.environ_class = None
        if self.c_value is not None:
            os.putenv(_VARIABLE, self.c_value)
        else:
            os.unsetenv(_VARIABLE)

    def _replace(self, owner: Any, attribute: str, replacement: Any) -> None:
        self.saved.append((owner, attribute, owner.__dict__[attribute]))
        setattr(owner, attribute, replacement)

    # ------------------------------------------------------------ what is routed

    def _route(self, owner: type, name: str, routed: Callable[..., Any]) -> None:
        """Replace the classmethod ``owner.name`` (where this client version has it): an operator's
        code gets ``routed(route, cls, *args)``, everyone else the original."""
        if name not in vars(owner):
            return
        original = vars(owner)[name].__func__

        def method(cls: Any, *args: Any) -> Any:
            route = current_route()
            return original(cls, *args) if route is None else routed(route, cls, *args)

        self._replace(owner, name, classmethod(method))

    def _route_loaders(self, kube_config: Any, incluster: Any) -> None:
        original_loader = self.loader = kube_config._get_kube_config_loader

        def get_loader(filename: Any = None, config_dict: Any = None, **kwargs: Any) -> Any:
            route = current_route()
            if route is None:
                return original_loader(filename=filename, config_dict=config_dict, **kwargs)
            route.note_redirect("load_kube_config()")
            kept = {key: value for key, value in kwargs.items() if key in ("temp_file_path",)}
            return _choosing_proxy_on_load(original_loader(filename=str(route.kubeconfig), **kept))

        self._replace(kube_config, "_get_kube_config_loader", get_loader)

        loader_class = incluster.InClusterConfigLoader
        original_load_and_set = loader_class.load_and_set

        def load_and_set(loader: Any, client_configuration: Any = None) -> None:
            route = current_route()
            if route is None:
                original_load_and_set(loader, client_configuration)
                return
            route.note_redirect("load_incluster_config()")
            if client_configuration is None:
                route.configuration = route.load()
            else:
                route.load(client_configuration)

        self._replace(loader_class, "load_and_set", load_and_set)


def _choosing_proxy_on_load(loader: Any) -> Any:
    """``loader`` (a kube_config loader of a proxy kubeconfig), whose ``load_and_set`` also keeps
    the configuration it fills off the environment's proxy: the proxy listens on 127.0.0.1."""
    load_and_set = loader.load_and_set

    def load_and_set_directly(client_configuration: Any) -> None:
        load_and_set(client_configuration)
        choose_proxy(client_configuration, loader)

    loader.load_and_set = load_and_set_directly
    return loader


patches = _Patches()
"""``patches.acquire(route)`` routes the defaults for ``route``'s operator until ``release(route)``."""
