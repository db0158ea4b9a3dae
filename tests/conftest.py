import os
import sys

from hypothesis import settings

# make tests/naive*.py importable as plain modules
sys.path.insert(0, os.path.dirname(__file__))

# CI runs the property tests with a fixed seed (reproducible runs); locally they explore.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
