#!/usr/bin/env python3
"""The dataset runner under the name of the configuration reference: ``scripts/run_dataset.py ROOT
[options]`` is ``sol-execbench dataset run ROOT [options]``, the same flags (docs/dataset.md)."""

import sys

from sol_execbench.cli.main import main

if __name__ == "__main__":
    sys.argv[1:1] = ["dataset", "run"]
    main()
