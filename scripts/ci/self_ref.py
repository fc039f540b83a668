"""Which ktest repository and commit a reusable-workflow job runs: ``self_ref.py`` (env ``JOB_CONTEXT``).

A reusable workflow's own files (the setup action, these scripts) are not in the
caller's checkout; the job checks ktest out beside it. Which repository and
commit: the ``ktest-repository``/``ktest-ref`` inputs when given, else the job
context's ``workflow_repository``/``workflow_sha`` (the reusable workflow's own;
``github.sha`` would be the caller's), passed in as ``toJSON(job)``.
"""

from __future__ import annotations

import json
import os
import re
import sys

from gha import CIError, fail, set_outputs

_SHA = re.compile(r"^[0-9a-f]{40}$")


def self_reference(job_context: str, repository: str = "", ref: str = "") -> tuple[str, str]:
    """(owner/repo, ref) of ktest for this job."""
    try:
        job = json.loads(job_context) if job_context.strip() else {}
    except ValueError as error:
        raise CIError(f"JOB_CONTEXT is not JSON: {error}") from error
    repository = repository or str(job.get("workflow_repository") or "")
    ref = ref or str(job.get("workflow_sha") or "")
    if not repository or not ref:
        raise CIError(
            "cannot tell which ktest commit this reusable workflow is: the job context has no "
            "workflow_repository/workflow_sha (older GitHub Enterprise Server?). Pass the inputs "
            "ktest-repository (owner/name) and ktest-ref (the commit SHA you call the workflow at)."
        )
    if "/" not in repository:
        raise CIError(f"ktest-repository {repository!r} is not owner/name")
    return repository, ref


def main() -> int:
    try:
        repository, ref = self_reference(
            os.environ.get("JOB_CONTEXT", ""),
            os.environ.get("KTEST_REPOSITORY", "").strip(),
            os.environ.get("KTEST_REF", "").strip(),
        )
    except CIError as error:
        return fail(error)
    set_outputs({"repository": repository, "ref": ref, "pinned": str(bool(_SHA.match(ref))).lower()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
