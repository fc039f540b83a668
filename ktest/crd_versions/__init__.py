"""A CRD's versions over time (an add-on): evolve a CRD, migrate its stored objects
(:mod:`.evolution`, public as ``ktest.cluster.evolve_crd``, ``migrate_storage``,
``StorageMigration``) and assert round trips and the stored version (:mod:`.assertions`,
public as ``ktest.assertions.assert_round_trips`` and ``assert_stored_as``).
"""
