"""--sanitize output parsing and the child's job; the trace channel against forged lines."""

from __future__ import annotations

import os
from pathlib import Path

from sol_execbench.evaluate.parent import sanitize
from sol_execbench.evaluate.channel import FD_ENV, KEY_ENV, ChannelWriter, new_key, read_messages
from sol_execbench.platform.sanitizer import memcheck_command

DATA = Path(__file__).parent / "data"


def test_findings_are_the_first_line_of_each_error():
    findings = sanitize.parse_findings((DATA / "compute_sanitizer_memcheck.txt").read_text())
    assert findings == ["Invalid __global__ write of size 4 bytes"] * 2


def test_log_segments_follow_the_start_messages():
    log = "aaa========= Invalid __global__ read of size 4 bytes\nbbb"
    segments = sanitize._segments(log, [("w1", 0), ("w2", 3)])
    assert segments["w1"] == "aaa" and sanitize.parse_findings(segments["w2"]) == ["Invalid __global__ read of size 4 bytes"]


def test_the_checked_run_is_one_call_with_the_events_method():
    job = {"config": {"warmup_runs": 10, "iterations": 50, "correctness_rounds": 10, "seed": 3}, "dump_dir": "/x"}
    checked = sanitize.sanitize_job(job)
    config = checked["config"]
    assert checked["guard_outputs"] is False and checked["dump_dir"] is None  # exact-size outputs for memcheck
    assert config == {"warmup_runs": 0, "iterations": 1, "correctness_rounds": 1, "seed": 3, "benchmark_reference": False,
                      "lock_clocks": False, "timing": {"method": "events"}}


def test_no_checker_without_an_nvidia_gpu():
    assert memcheck_command("cpu")[0] is None
    assert "AddressSanitizer" in memcheck_command("rocm")[1]
    reports = sanitize.run_sanitizer({}, [type("W", (), {"uuid": "w1"})()], Path("/nonexistent"), "cpu", 10)
    assert reports["w1"].ran is False and reports["w1"].tool == "none"


def _channel_pair(monkeypatch):
    read_fd, write_fd = os.pipe()
    key = new_key()
    monkeypatch.setenv(FD_ENV, str(write_fd))
    monkeypatch.setenv(KEY_ENV, key)
    writer = ChannelWriter.from_environment()
    return read_fd, writer, key


def test_signed_messages_pass_and_forged_lines_are_reported(monkeypatch):
    read_fd, writer, key = _channel_pair(monkeypatch)
    assert FD_ENV not in os.environ and KEY_ENV not in os.environ  # gone before solution code is imported
    writer.send("trace", trace={"status": "INCORRECT_NUMERICAL"})
    os.write(writer._fd, b'{"type": "trace", "trace": {"status": "PASSED"}}\n')  # unsigned
    os.write(writer._fd, b"0" * 64 + b' {"type": "trace"}\n')  # a guessed signature
    writer.send("done")
    writer.close()
    messages, forged = [], []
    read_messages(read_fd, key, messages.append, forged.append)
    assert [m["type"] for m in messages] == ["trace", "done"] and messages[0]["trace"]["status"] == "INCORRECT_NUMERICAL"
    assert len(forged) == 2


def test_a_message_signed_with_another_key_is_forged(monkeypatch):
    read_fd, writer, _ = _channel_pair(monkeypatch)
    writer.send("trace", trace={})
    writer.close()
    messages, forged = [], []
    read_messages(read_fd, new_key(), messages.append, forged.append)
    assert messages == [] and len(forged) == 1
