"""A fresh child's GPU context begun beside torch's import: torch then works in that same primary
context; where no NVIDIA GPU is named, nothing starts. Fresh interpreters."""

from __future__ import annotations

import pytest

from .fresh_interpreter import run_program

NO_GPU_NAMED = """
import threading
from sol_execbench.platform import device
device.start_device_context("cpu")
print(len(device._context_starts), threading.active_count())
"""

SAME_CONTEXT = """
import ctypes
from sol_execbench.platform import device
device.start_device_context("cuda:0")
started = len(device._context_starts)
info = device.use_device("cuda:0")
import torch
torch.ones(4, device="cuda").sum().item()
driver = ctypes.CDLL("libcuda.so.1")
dev, primary, current = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
driver.cuDeviceGet(ctypes.byref(dev), 0)
driver.cuDevicePrimaryCtxRetain(ctypes.byref(primary), dev)
driver.cuCtxGetCurrent(ctypes.byref(current))
print(started, len(device._context_starts), primary.value == current.value)
"""


def test_no_context_thread_where_no_gpu_is_named():
    assert run_program(NO_GPU_NAMED)[0] == "0 1"


@pytest.mark.gpu
def test_torch_works_in_the_primary_context_begun_beside_its_import():
    assert run_program(SAME_CONTEXT)[0] == "1 0 True"
