"""The brief, labelled summary of a snapshot (one line a block), as data the CLI renders."""

from __future__ import annotations

from typing import Any

NOT_FOUND = "(not found)"


def _join(*parts: Any) -> str:
    return ", ".join(str(p) for p in parts if p not in (None, "", [], {}))


def _named(label: str, value: Any) -> str | None:
    return f"{label} {value}" if value not in (None, "") else None


def _host(s: dict[str, Any]) -> str:
    h = s["host"]
    container = h["container"]["type"]
    return _join(h["hostname"], h["os_release"], _named("kernel", h["kernel_release"]), _named("glibc", h["glibc_version"]),
                 h["cpu_model"], _named("container", container if container != "none" else None))


def _torch(s: dict[str, Any]) -> str:
    p = s["pytorch_build"]
    if p["version"] is None:
        return NOT_FOUND
    on = [name.removeprefix("USE_") for name, value in p["build_flags"].items()
          if value and name in ("USE_ROCM_CK_SDPA", "USE_ROCM_CK_GEMM", "USE_FBGEMM", "USE_FBGEMM_GENAI")]
    return _join(p["version"], _named("commit", (p["git_commit"] or "")[:12] or None), _named("CUDA", p["cuda_version"]),
                 _named("HIP", p["hip_version"]), _named("install", p["install_kind"]), _named("flags", " ".join(on) or None))


def _accelerator(s: dict[str, Any]) -> str:
    a = s["accelerator"]
    if not a["devices"]:
        return f"no GPU visible to torch (host looks like: {a['vendor_hint']})"
    names: dict[str, int] = {}
    for dev in a["devices"]:
        key = f"{dev['name']} ({dev['arch']})"
        names[key] = names.get(key, 0) + 1
    return f"{a['vendor']}: " + ", ".join(f"{n} x {k}" for k, n in names.items())


def _nvidia(s: dict[str, Any]) -> list[tuple[str, str]]:
    n = s["nvidia"]
    if not n["present"]:
        return [("NVIDIA", "not present")]
    devices = n["devices"]
    first = devices[0] if devices else None
    clocks = ""
    if first:
        c = first["clocks"]
        clocks = _join(_named("max SM MHz", c["max"]["sm_mhz"]), _named("app SM MHz", c["application"]["graphics_mhz"]),
                       _named("ECC", first["ecc"]["current"]), _named("persistence", first["persistence_mode"]),
                       _named("MIG", first["mig"]["current"]), _named("power limit W", first["power"]["limit_w"]))
    libs = n["libraries"]
    lib_line = _join(*(f"{k} {v['version'] or NOT_FOUND}" for k, v in libs.items()))
    return [
        ("NVIDIA driver", _join(n["driver_version"], _named("CUDA driver", n["cuda_driver_version"]),
                                _named("via", n["nvml_source"]), f"{len(devices)} device(s)")),
        ("NVIDIA clocks (GPU 0)", clocks or NOT_FOUND),
        ("CUDA libraries", lib_line),
    ]


def _rocm(s: dict[str, Any]) -> list[tuple[str, str]]:
    r = s["rocm"]
    if not r["present"]:
        return [("ROCm", "not present")]
    libs = _join(*(f"{k} {v['header_version'] or v['file_version'] or NOT_FOUND}" for k, v in r["libraries"].items()))
    ck, aot, smi = r["composable_kernel"], r["aotriton"], r["smi"]
    perf = sorted({d["perf_level"] for d in smi["devices"] if d["perf_level"]})
    return [
        ("ROCm", _join(r["version"] or NOT_FOUND, _named("HIP", r["hip"]["version"]), _named("agents", r["agents"]["arch_counts"]))),
        ("ROCm libraries", libs),
        ("CK / AOTriton", _join(_named("CK", ck["version"] or NOT_FOUND), _named("ck_tile", ck["ck_tile_present"]),
                                _named("AOTriton", aot["bundled_version"] or "(not bundled)"))),
        ("AMD clocks", _join(_named("via", smi["tool"]), _named("perf level", "/".join(perf) or None)) or NOT_FOUND),
    ]


def summary_lines(snapshot: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, text)`` pairs, one a block; vendor blocks that do not apply say so in one line."""
    s = snapshot
    installed = _join(*(f"{k} {v}" for k, v in s["packages"].items() if v and k != "torch"))
    set_vars = [k for k, v in s["env_vars"].items() if v is not None]
    lines = [
        ("Snapshot", _join(f"schema {s['schema_version']}", s["timestamp"], _named("probe s", s["probe_wall_s"]),
                           "extended" if s["extended"] else None)),
        ("Host", _host(s)),
        ("Python", _join(s["python"]["version"], s["python"]["venv_kind"], s["python"]["executable"])),
        ("PyTorch", _torch(s)),
        ("Accelerator", _accelerator(s)),
        *_nvidia(s),
        *_rocm(s),
        ("Packages", installed or "(none of the kernel packages)"),
        ("Env vars set", ", ".join(set_vars) or "(none of the canonical list)"),
    ]
    return lines


def status_line(snapshot: dict[str, Any]) -> str:
    """``[OK]`` or ``[PARTIAL, N reason(s)]``."""
    count = len(snapshot.get("partial_reasons") or [])
    return f"[PARTIAL, {count} reason(s)]" if count else "[OK]"
