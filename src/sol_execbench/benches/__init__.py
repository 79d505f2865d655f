"""The product's benches (``sol-execbench bench ...``): PyTorch baselines and fast_p, the GEMM sweep, the
all-reduce sweep. Each writes its results as JSON (formats in ``schema/benches.py``) and renders its
figures from that JSON alone, so a committed result re-renders without a GPU."""
