"""Running a kopf operator in-process, one job per module: ``runner`` (``KopfOperator``,
``run_kopf``: the thread, its event loop and readiness), ``loading`` (handlers loaded into a
fresh registry), ``settings`` (the run's ``kopf.OperatorSettings``), ``retries`` (handlers and
requests still retrying) and ``liveness`` (kopf's liveness endpoint). Users import
``KopfOperator`` and ``run_kopf`` from :mod:`ktest.operators`."""
