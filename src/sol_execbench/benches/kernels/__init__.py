"""Sources of the solutions the benches ship (read as text and staged by the evaluator, never imported here)."""
