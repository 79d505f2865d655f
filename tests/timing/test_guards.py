"""Integrity snapshot, output aliasing, input checksums, guard bands (CPU)."""

from __future__ import annotations

import ctypes
import time

import torch

import sol_execbench.evaluate.child.workload_eval  # noqa: F401  (the harness modules the snapshot watches)
from sol_execbench.evaluate.child import guards, timing


def test_a_clean_process_shows_no_tampering():
    assert guards.IntegritySnapshot().tampered() == []


def test_replaced_harness_function_timer_and_tensor_method_are_named(monkeypatch):
    snapshot = guards.IntegritySnapshot()
    monkeypatch.setattr(timing, "measure", lambda *a, **k: None)
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(torch.Tensor, "zero_", lambda self: self, raising=False)  # shadows the C method
    assert snapshot.tampered() == ["sol_execbench.evaluate.child.timing.measure", "time.perf_counter_ns",
                                   "torch.Tensor.zero_"]


def test_a_replaced_latency_rule_is_tampering(monkeypatch):
    snapshot = guards.IntegritySnapshot()
    monkeypatch.setattr(timing.paired, "side_latency_ms", lambda d, h, a: 0.0)
    assert snapshot.tampered() == ["sol_execbench.evaluate.child.timing.paired.side_latency_ms"]


def test_library_state_on_watched_classes_is_not_tampering_but_their_methods_are(monkeypatch):
    """torch.cuda.graph sets its lazily made default_capture_stream at the first capture (the
    graph method's own): that is torch's state, not a replaced function (a GPU run once called it
    REWARD_HACK). Replacing the class's methods still is."""
    snapshot = guards.IntegritySnapshot()
    monkeypatch.setattr(torch.cuda.graph, "default_capture_stream", object())
    assert snapshot.tampered() == []
    monkeypatch.setattr(torch.cuda.graph, "__enter__", lambda self: None)
    assert snapshot.tampered() == ["torch.cuda.graph.__enter__"]


def test_a_method_every_schema_model_inherits_is_held_once_and_a_shadowing_one_per_model(monkeypatch):
    """pydantic's BaseModel methods resolve to one namespace for every schema model: replaced there,
    they are named once, as pydantic's; assigned on one model, they shadow it there and that is named."""
    import pydantic

    from sol_execbench.schema import Trace

    snapshot = guards.IntegritySnapshot()
    monkeypatch.setattr(pydantic.BaseModel, "model_dump", lambda self, **kw: {})
    assert snapshot.tampered() == ["pydantic.BaseModel.model_dump"]
    monkeypatch.undo()
    monkeypatch.setattr(Trace, "model_dump_json", lambda self, **kw: "{}", raising=False)
    assert snapshot.tampered() == ["sol_execbench.schema.trace.Trace.model_dump_json"]


def test_the_check_survives_replacing_the_checker(monkeypatch):
    snapshot = guards.IntegritySnapshot()
    monkeypatch.setattr(guards.IntegritySnapshot, "_tampered", lambda self: [])
    monkeypatch.setattr(timing, "summarize", lambda *a: None)
    assert "sol_execbench.evaluate.child.timing.summarize" in snapshot.tampered()


def test_outputs_sharing_memory_with_inputs_are_found():
    x, y = torch.randn(8), torch.randn(8)
    names = ["x", "y"]
    assert guards.shared_memory([x], ["z"], [x, y], names) == ["output 'z' shares memory with input 'x'"]
    assert guards.shared_memory([y[2:].view(2, 3)], ["z"], [x, y], names) == ["output 'z' shares memory with input 'y'"]
    assert guards.shared_memory([x + y], ["z"], [x, y], names) == []


def test_foreign_output_types():
    class Sub(torch.Tensor):
        pass

    assert guards.foreign_output_types([torch.zeros(1), torch.zeros(1).as_subclass(Sub), 3]) == ["Sub", "int"]


def test_checksum_sees_a_single_changed_byte_in_any_dtype():
    for t in (torch.randn(1000), torch.randn(7, 9).to(torch.bfloat16), torch.rand(33) > 0.5,
              torch.randint(0, 9, (5, 5)), torch.randn(6, 4).t(), torch.tensor(3.5)):
        before = guards.tensor_checksum(t)
        assert guards.tensor_checksum(t.clone()) == before
        raw = t.view(-1) if t.dim() and t.is_contiguous() else None
        if raw is None:
            t.add_(1) if t.dtype != torch.bool else t.logical_not_()
        else:
            raw.view(torch.uint8)[3] ^= 1
        assert guards.tensor_checksum(t) != before, t.dtype
    assert guards.tensor_checksum(torch.empty(0)) == 0


def test_checksum_is_the_position_weighted_word_sum_in_one_chunk_and_in_several():
    """Word i (from 1) weighs i, modulo 2**64, whether the tensor fits one chunk or spans several."""
    import numpy as np

    for words in (1000, guards._CHUNK_WORDS, guards._CHUNK_WORDS + 1000):
        t = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32)
        weights = np.arange(1, words + 1, dtype=np.uint64)
        expected = int((t.numpy().astype(np.int64).astype(np.uint64) * weights).sum(dtype=np.uint64))
        assert guards.tensor_checksum(t) == expected, words


def test_swapping_two_elements_changes_the_checksum():
    t = torch.arange(10, dtype=torch.float32)
    before = guards.tensor_checksum(t)
    t[[2, 7]] = t[[7, 2]]
    assert guards.tensor_checksum(t) != before


def test_changed_names_only_changed_tensors():
    a, b = torch.ones(4), torch.ones(4)
    before = guards.checksums([a, b, 5])
    b[0] = 2
    assert guards.changed(["a", "b", "k"], before, guards.checksums([a, b, 5])) == ["b"]


def _flip_bytes(address: int, count: int) -> None:
    raw = (ctypes.c_uint8 * count).from_address(address)
    for i in range(count):
        raw[i] ^= 0xFF


def test_guard_bands_catch_writes_before_and_after_an_output_only():
    plain = [torch.full((100,), float("nan")), torch.zeros(3, 5, dtype=torch.int32)]
    guarded = guards.GuardedOutputs(plain, ["a", "b"])
    a, b = guarded.tensors
    assert torch.isnan(a).all() and a.shape == (100,) and b.shape == (3, 5) and b.dtype == torch.int32
    a.fill_(1.0)
    b.fill_(7)
    assert guarded.violations() == []
    # Flip every bit of the bytes written: the canary is random, so a fixed value would match it by chance.
    _flip_bytes(a.data_ptr() + a.numel() * 4, 8)
    _flip_bytes(b.data_ptr() - 4, 4)
    found = guarded.violations()
    assert len(found) == 2 and "output 'a'" in found[0] and "8 after it" in found[0] and "4 byte(s)" in found[1]


def test_guarded_outputs_keep_alignment():
    (out,) = guards.GuardedOutputs([torch.zeros(1000)], ["z"]).tensors
    assert (out.data_ptr() - out.untyped_storage().data_ptr()) % 512 == 0


def test_replaced_builtins_do_not_blind_the_integrity_check(monkeypatch):
    """The check compares through builtins bound when the harness was imported: a solution that
    makes ``all`` always true or ``sorted`` return nothing still has its replacement named."""
    import builtins

    snapshot = guards.IntegritySnapshot()
    monkeypatch.setattr(timing, "measure", lambda *a, **k: None)
    monkeypatch.setattr(builtins, "all", lambda _values: True)
    monkeypatch.setattr(builtins, "sorted", lambda _values: [])
    monkeypatch.setattr(builtins, "any", lambda _values: False)
    monkeypatch.setattr(builtins, "map", lambda *_args: iter(()))
    assert snapshot.tampered() == ["sol_execbench.evaluate.child.timing.measure"]


class _EqualToEverything:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def test_a_deleted_a_look_alike_and_a_shadowing_entry_are_each_named(monkeypatch):
    """The check compares identities and names what changed: a deleted harness function, a
    replacement that claims equality with everything, and a method a class gains where it
    inherited one."""
    snapshot = guards.IntegritySnapshot()
    monkeypatch.delattr(timing, "summarize")
    assert snapshot.tampered() == ["sol_execbench.evaluate.child.timing.summarize"]
    monkeypatch.undo()
    monkeypatch.setattr(timing, "measure", _EqualToEverything())
    assert snapshot.tampered() == ["sol_execbench.evaluate.child.timing.measure"]
    monkeypatch.undo()
    monkeypatch.setattr(timing.SideFailed, "with_traceback", lambda self, tb: self, raising=False)  # inherited
    assert snapshot.tampered() == ["sol_execbench.evaluate.child.timing.paired.SideFailed.with_traceback"]
    monkeypatch.undo()
    assert snapshot.tampered() == []
