"""Everything Docker- and kind-specific: the engine, the kind binary, node images, clusters.

``engine`` finds the Docker engine and explains what is missing; ``binary`` resolves
or builds kind; ``recipe`` holds the facts node images are built from; ``image``
builds and finds ktest's offline node images.
"""
