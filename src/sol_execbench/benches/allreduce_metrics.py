"""All-reduce arithmetic without torch: the message sizes, nccl-tests' bandwidths, the alpha-beta fit.

nccl-tests (doc/PERFORMANCE.md) defines, for a message of S bytes timed at t seconds:
``algbw = S / t`` and, for all-reduce over n ranks, ``busbw = algbw * 2(n-1)/n`` (the bandwidth
each link would need for a ring to finish in t; 0 for one rank, which moves nothing)."""

from __future__ import annotations

from sol_execbench.schema.benches import AllreduceMeasurement, AllreduceSweep, AlphaBetaFit, ModelPoint

from .figures import size_label

GB = 1e9  # nccl-tests' GB/s are 1e9 bytes per second
ELEMENT_BYTES = 4  # float32, nccl-tests' default data type


def message_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Sizes from ``min_bytes`` to ``max_bytes`` multiplying by ``factor`` (nccl-tests' -b -e -f),
    each a whole number of float32 elements (at least one)."""
    if min_bytes < 1 or max_bytes < min_bytes or factor < 2:
        raise ValueError("need 1 <= min_bytes <= max_bytes and factor >= 2")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        rounded = max(ELEMENT_BYTES, size - size % ELEMENT_BYTES)
        if not sizes or rounded != sizes[-1]:
            sizes.append(rounded)
        size *= factor
    return sizes


def bus_factor(ranks: int) -> float:
    return 2.0 * (ranks - 1) / ranks


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    return size_bytes / seconds / GB if seconds > 0 else 0.0


def busbw_gbps(size_bytes: int, seconds: float, ranks: int) -> float:
    return algbw_gbps(size_bytes, seconds) * bus_factor(ranks)


def _relative_sse(measurements: list[AllreduceMeasurement], alpha: float, per_byte: float) -> float:
    return sum(((alpha + per_byte * m.bytes - m.time_us) / max(m.time_us, 1e-9)) ** 2 for m in measurements)


def fit_alpha_beta(measurements: list[AllreduceMeasurement]) -> AlphaBetaFit:
    """Least squares of ``t = alpha + S / beta`` on relative error (each size weighs alike, from a
    few bytes, where alpha rules, to GiB, where beta does), over one configuration's sizes."""
    if len(measurements) < 2:
        raise ValueError("a fit needs at least two sizes")
    first = measurements[0]
    # minimise sum(((a + b S - t) / t)^2): linear least squares with rows (1/t, S/t) and target 1
    s11 = s12 = s22 = r1 = r2 = 0.0
    for m in measurements:
        t = max(m.time_us, 1e-9)
        u, v = 1.0 / t, m.bytes / t
        s11, s12, s22, r1, r2 = s11 + u * u, s12 + u * v, s22 + v * v, r1 + u, r2 + v
    det = s11 * s22 - s12 * s12
    alpha, per_byte = ((r1 * s22 - r2 * s12) / det, (s11 * r2 - s12 * r1) / det) if abs(det) > 1e-300 else (-1.0, -1.0)
    # Neither term may be negative: where noise makes one so, the best fit of the other alone.
    if per_byte < 0 or alpha < 0:
        alpha_only = (r1 / s11, 0.0)
        bandwidth_only = (0.0, r2 / s22)
        alpha, per_byte = min((alpha_only, bandwidth_only), key=lambda ab: _relative_sse(measurements, *ab))
    points = []
    for m in measurements:
        model = alpha + per_byte * m.bytes
        error = (model - m.time_us) / m.time_us if m.time_us > 0 else 0.0
        points.append(ModelPoint(bytes=m.bytes, measured_us=m.time_us, model_us=model, relative_error=error))
    return AlphaBetaFit(ranks=first.ranks, buffer_kind=first.buffer_kind, placement=first.placement,
                        launch=first.launch, alpha_us=alpha,
                        beta_gbps=(1.0 / per_byte) * 1e6 / GB if per_byte > 0 else None,  # bytes/us -> GB/s
                        max_relative_error=max(abs(p.relative_error) for p in points), points=points)


def configuration(m: AllreduceMeasurement) -> tuple[int, str, str, str]:
    """What one fit, one line or one series covers: ranks, buffer kind, placement and launch."""
    return m.ranks, m.buffer_kind, m.placement, m.launch


def configuration_label(m: AllreduceMeasurement | AlphaBetaFit) -> str:
    return f"{m.buffer_kind} {m.placement}, {m.launch}"


def fits_by_configuration(measurements: list[AllreduceMeasurement]) -> list[AlphaBetaFit]:
    groups: dict[tuple, list[AllreduceMeasurement]] = {}
    for m in measurements:
        groups.setdefault(configuration(m), []).append(m)
    return [fit_alpha_beta(sorted(group, key=lambda m: m.bytes)) for _key, group in sorted(groups.items())
            if len(group) >= 2]


def largest_size_link_lines(sweep: AllreduceSweep) -> list[str]:
    """Per configuration of two or more ranks, busbw at its largest size as a fraction of the datasheet
    link bandwidth (per direction): a ring all-reduce's busbw is what each link carries each way."""
    link = sweep.link_datasheet_gbps
    if link is None:
        return [f"no datasheet link bandwidth to compare busbw with: {sweep.link_source or 'none recorded'}"]
    largest: dict[tuple[int, str, str, str], AllreduceMeasurement] = {}
    for m in sweep.measurements:
        key = configuration(m)
        if m.ranks > 1 and (key not in largest or m.bytes > largest[key].bytes):
            largest[key] = m
    return [f"busbw at {size_label(m.bytes)} ({m.ranks} ranks, {configuration_label(m)}): {m.busbw_gbps:.0f} GB/s "
            f"= {100 * m.busbw_gbps / link:.0f}% of the {link:.0f} GB/s datasheet link (per direction)"
            for _key, m in sorted(largest.items())]
