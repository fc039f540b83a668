"""Namespace deletion in the background, waited for at the end of the session.

kube-controller-manager's namespace controller waits a fixed 5 seconds after a
namespace is marked for deletion before it empties it (so that HA API servers
see the deletion), so waiting in each test's teardown costs every test at
least 5 s. With ``ktest_namespace_deletion = background`` the teardown only
starts the deletion; this reaper waits for it (and removes stuck finalizers
after the grace period) on a few threads while the next tests run, and the
session waits for all of them before it ends. No pytest here.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass

from ktest.cluster.namespaces import NamespaceCleanup


@dataclass
class Reaped:
    """How one background deletion ended: a cleanup report, or the error it raised."""

    owner: str
    cleanup: NamespaceCleanup | None = None
    error: BaseException | None = None


class NamespaceReaper:
    """Runs namespace deletions on a small thread pool; :meth:`drain` waits for all of them."""

    def __init__(self, max_workers: int = 8) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix="ktest-reaper")
        self._pending: list[tuple[str, concurrent.futures.Future[NamespaceCleanup]]] = []

    def submit(self, owner: str, delete: Callable[[], NamespaceCleanup]) -> None:
        """Start ``delete`` (which deletes and waits) for the namespace of test ``owner``."""
        self._pending.append((owner, self._pool.submit(delete)))

    def drain(self) -> list[Reaped]:
        """Wait for every deletion started so far; return how each ended."""
        pending, self._pending = self._pending, []
        results = []
        for owner, future in pending:
            try:
                results.append(Reaped(owner, cleanup=future.result()))
            except Exception as error:
                results.append(Reaped(owner, error=error))
        return results

    def close(self) -> list[Reaped]:
        results = self.drain()
        self._pool.shutdown(wait=True)
        return results
