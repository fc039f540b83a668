"""Project-wide test configuration: pytester drives the plugin end to end."""

pytest_plugins = ["pytester"]
