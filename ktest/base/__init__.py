"""The ground floor: what every other part of ktest stands on, importing nothing above it.

Child processes that never outlive their parent (``process``), a certificate
authority (``certs``), free ports (``ports``), kubeconfig files (``kubeconfig``),
``/proc`` facts (``procfs``), holder records (a directory or record held by a live
process, swept once it is dead: ``holders``), the janitor process that cleans
up after a killed test run (``janitor``, ``janitor_client``) and attributes read
through another attribute, one line each instead of a property each (``delegation``)
and ``with x:`` for resources that close (and start) themselves (``closing``).
"""
