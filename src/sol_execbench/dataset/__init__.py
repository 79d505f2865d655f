"""Whole suites: run every problem of a dataset root (resumable), and migrate other layouts into
upstream SOL-ExecBench problem folders. A problem is identified by its path relative to the root."""
