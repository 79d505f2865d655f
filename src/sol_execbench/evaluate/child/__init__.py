"""The child side of an evaluation: the driver, inputs, correctness, timing and guards.

Runs in the sandboxed evaluation child and trusts nothing it imports. This package root
imports nothing."""
