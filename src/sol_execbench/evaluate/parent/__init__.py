"""The parent side of an evaluation: stage, launch, stream each trace as it is verified, clean up.

Nothing here imports torch at module level; the children it starts die with it."""
