"""Runs a Python script taken from the docs (argv[1]) with the stand-ins in this folder first on the
path (TRL, peft, datasets, transformers) and Python's random generator seeded, so its draws repeat."""
import os
import random
import runpy
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
random.seed(0)
runpy.run_path(sys.argv[1], run_name="__main__")
