import os
import sys

# make tests/naive*.py importable as plain modules
sys.path.insert(0, os.path.dirname(__file__))
