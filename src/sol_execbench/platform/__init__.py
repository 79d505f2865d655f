"""Vendor and device facts: the one place that asks "AMD, NVIDIA or CPU?".

Everything above calls ``current()`` and reads the frozen ``DeviceInfo`` it returns.
``vendor_hint()`` answers without importing torch (used by the parent process).
"""

from .device import DeviceInfo, cuda_arch_name, current, gpu_expected, make_current, parse_device_spec, use_device, vendor_hint
from .host import host_memory_bytes

__all__ = ["DeviceInfo", "cuda_arch_name", "current", "gpu_expected", "host_memory_bytes", "make_current", "parse_device_spec", "use_device",
           "vendor_hint"]
