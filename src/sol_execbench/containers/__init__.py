"""Containers: the declared ROCm and CUDA Docker targets, the host and dependency preflight, the
docker commands of a wrapper run, and the compatibility records (``sol-execbench docker ...``,
``scripts/run_docker.sh``). Reads the environment probe (``envprobe``) for its facts."""
