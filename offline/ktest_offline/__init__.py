"""ktest's offline builders, for machines that cannot download Kubernetes or pull kind images.

With internet, ktest downloads envtest's release binaries and the kind backend runs
kind's ``kindest/node`` images. Where only package registries (PyPI, the Go module
proxy, a Debian mirror) are reachable, this distribution builds them instead:

- :mod:`ktest_offline.kubernetes`: Kubernetes and etcd from Go modules (``ktest binaries install``);
- :mod:`ktest_offline.node_image`: kind node images (``ktest kind build-image``): a Debian root
  file system, CoreDNS, pause, crictl and the Kubernetes node binaries.

Every Go build runs through ktest's one Go runner, :mod:`ktest.assets.gotool`.

ktest reaches them through its plug-in points (the entry-point groups
``ktest.binary_sources`` and ``ktest.node_image_sources``, see :mod:`ktest_offline.sources`);
ktest itself never imports this package.
"""
