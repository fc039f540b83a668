"""The control plane's in-place upgrade to the next minor (an add-on).

``ControlPlane.upgrade`` reaches :mod:`ktest.plane_upgrade.upgrade` by name through
:mod:`ktest.addon_registry`; the ``control_plane_upgrade`` fixture (:mod:`.fixtures`) gives a test
a plane of its own to upgrade, and :mod:`.assertions` judges what the operator did through it
(public as ``ktest.assertions.assert_objects_intact`` and its neighbours).
"""
