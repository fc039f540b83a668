"""An operator imported by module name (run_kopf("shop.handlers")), with a helper module the
test imports too."""
