"""The code appended to a KernelBench problem file to make it a definition's reference."""

from __future__ import annotations

INPUTS_ENTRYPOINT = "sol_execbench_inputs"
MODEL_SEED = 42  # KernelBench seeds its model construction with 42 too

KERNELBENCH_WRAPPER = '''

# -- sol-execbench (dataset migrate-kernelbench): the problem above as a definition's reference ----------
# run() calls one Model per device, built on the CPU from get_init_inputs() under a fixed seed and then
# moved, so the reference and a solution made from this file hold the same weights on every device.
# The custom-inputs entry point makes the inputs with get_inputs() on the evaluation device, from the
# RNG the evaluator seeds for each round.
import torch as _sol_execbench_torch

_sol_execbench_models = {{}}


def _sol_execbench_model(*values):
    device = next((v.device for v in values if isinstance(v, _sol_execbench_torch.Tensor)), "cpu")
    if str(device) not in _sol_execbench_models:
        with _sol_execbench_torch.random.fork_rng(devices=[]):
            _sol_execbench_torch.manual_seed({seed})
            model = Model(*get_init_inputs())
        _sol_execbench_models[str(device)] = model.to(device)
    return _sol_execbench_models[str(device)]


def {entry}(axes_and_scalars, device):
    with _sol_execbench_torch.device(device):
        values = list(get_inputs())
    return dict(zip({names!r}, values))


@_sol_execbench_torch.no_grad()
def run({params}):
    return _sol_execbench_model({params})({params})
'''


def wrapped_reference(source: str, input_names: list[str]) -> str:
    """The problem's source, then the wrapper for its inputs (``run``'s parameters, in order)."""
    params = ", ".join(input_names)
    return source.rstrip("\n") + "\n" + KERNELBENCH_WRAPPER.format(
        entry=INPUTS_ENTRYPOINT, seed=MODEL_SEED, names=tuple(input_names), params=params)
