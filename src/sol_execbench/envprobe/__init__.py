"""Environment probe: what a run depended on (host, PyTorch build, GPUs, libraries, variables)."""
