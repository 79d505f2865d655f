"""The one error a bench raises for a bad input or flag: its message names the flag or file and the fix."""


class BenchUsageError(Exception):
    """One line for the command line to print before exiting 2."""
