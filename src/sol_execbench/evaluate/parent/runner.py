"""Parent side of an evaluation: stage, build, run the child (restarting after crashes), turn
whatever happened into one trace per workload."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from sol_execbench.build import BuildFailure, builder_for
from sol_execbench.build.base import write_sources
from sol_execbench.platform import host_memory_bytes, vendor_hint
from sol_execbench.schema import (BenchmarkConfig, Definition, DeviceRecord, Environment, Evaluation,
                                  EvaluationStatus as S, IsolationMode, IsolationRecord, SanitizerReport, Solution,
                                  Trace, Workload)

from .. import triton_launchers
from .child_env import CHILD_STDERR_LOG, CHILD_STDOUT_LOG
from .early_child import EarlyChild
from .option_checks import timing_rounds_dir
from .process import STAGING_CLEANUP_ENV, ChildRun, describe_exit, exit_record, run_child, tail
from .sanitize import run_sanitizer

CLOCKS_LOCKED_ENV = "SOL_EXECBENCH_CLOCKS_LOCKED"
DEFAULT_MEMORY_FRACTION = 0.8

# The no-trace diagnostic: how much of each stream it keeps, how many child runs it describes, and
# how many of them the per-user temp folder keeps (by count and by age) when there is no --output.
SIDECAR_TAIL_BYTES = 16000
SIDECAR_MESSAGE_BYTES = 4000
SIDECAR_MAX_RUNS = 10
SIDECAR_KEEP_FILES = 50
SIDECAR_KEEP_AGE_S = 7 * 24 * 3600
ENV_HASH_WAIT_S = 60.0  # for an environment hash computed beside the run; a probe that takes longer gives none


def default_memory_limit() -> int | None:
    total = host_memory_bytes()
    return int(total * DEFAULT_MEMORY_FRACTION) if total else None


@dataclass
class EvalOptions:
    """How to run an evaluation (the CLI flags that are not BenchmarkConfig fields)."""

    device: str | None = None
    timeout_s: float = 600.0
    compile_timeout_s: float = 120.0
    keep_staging: bool = False
    memory_limit_bytes: int | None = field(default_factory=default_memory_limit)
    dump_failures: Path | None = None
    # The environment hash stamped on every trace, or its computation running beside the run (a
    # host's first probe imports torch: seconds the child's start-up need not wait for).
    env_hash: str | Future[str | None] | None = None
    output_path: Path | None = None  # where -o writes; the no-trace sidecar goes beside it
    use_build_cache: bool = True
    # A build of these same sources that failed already (the dataset pipeline's prebuild): every
    # workload gets its status and message, and nothing is compiled again.
    build_failure: BuildFailure | None = None
    use_warm_pool: bool = True  # take a pre-started child from `sol-execbench worker start` when one fits
    sanitize: bool = False  # also run one call per workload under a memory checker (--sanitize)
    isolation: IsolationMode = IsolationMode.AUTO  # the children's sandbox (--isolation, docs/security.md)
    # The launcher hook: a command prefix for the evaluation child (a profiler: ncu, rocprofv3) and
    # extra variables of its environment. Either one bypasses the warm pool (a warm child was
    # started without them).
    child_prefix: list[str] = field(default_factory=list)
    child_env: dict[str, str] = field(default_factory=dict)
    child_task: dict[str, Any] | None = None  # the child's task instead of evaluating (docs/profiling.md)
    on_message: Callable[[dict[str, Any]], None] | None = None  # every verified channel message of the child
    warnings: list[str] = field(default_factory=list)  # carried into every trace
    on_trace: Callable[[Trace], None] | None = None
    on_log: Callable[[str], None] | None = None  # -v: the child's output after each run
    # A child the caller started before the job (the command line, ``early_child``): the evaluation
    # stages into its folder, and its first child is this one where it fits.
    early_child: EarlyChild | None = None

    def environment_hash(self) -> str | None:
        """``env_hash``, waiting for one being computed (None if that fails or takes too long)."""
        if not isinstance(self.env_hash, Future):
            return self.env_hash
        try:
            return self.env_hash.result(timeout=ENV_HASH_WAIT_S)
        except Exception:  # noqa: BLE001  (a hash is a convenience; never fail an evaluation for it)
            return None


@dataclass
class _State:
    definition: Definition
    solution: Solution
    options: EvalOptions
    traces: dict[str, Trace] = field(default_factory=dict)
    hardware: str | None = None
    device: DeviceRecord | None = None
    sanitizer: dict[str, SanitizerReport] = field(default_factory=dict)
    isolation: IsolationRecord | None = None  # the sandbox planned for the children
    rounds_dir: str | None = None  # SOL_EXECBENCH_TIMING_ROUNDS's folder, made (``_rounds_dir``)
    # Traces arrive on the channel's reader thread as the child reports them; the main thread adds
    # the failures after the child has gone.
    lock: threading.RLock = field(default_factory=threading.RLock)

    def add(self, trace: Trace) -> None:
        with self.lock:
            if trace.workload.uuid in self.traces:
                return  # one trace per workload: the first verified one stands
            self._add(trace)

    def _add(self, trace: Trace) -> None:
        if trace.evaluation is not None:
            trace.evaluation.env_hash = self.options.environment_hash()  # the parent's, whatever a child wrote
        report = self.sanitizer.get(trace.workload.uuid)
        if report is not None and trace.evaluation is not None:
            trace.evaluation.sanitizer = report
            if report.errors:
                trace.evaluation.warnings.append(f"--sanitize: {report.tool} found {report.errors} problem(s): "
                                                 f"{report.findings[0]}")
        self.traces[trace.workload.uuid] = trace
        if self.options.on_trace:
            self.options.on_trace(trace)

    def fail(self, workload: Workload, status: S, log: str) -> None:
        evaluation = Evaluation(status=status, environment=Environment(hardware=self.hardware or _host_hardware()),
                                timestamp=datetime.now(timezone.utc).isoformat(), log=log, device=self.device,
                                warnings=list(self.options.warnings),
                                isolation=self.isolation)
        self.add(Trace(definition=self.definition.name, workload=workload, solution=self.solution.name,
                       evaluation=evaluation))


def _host_hardware() -> str:
    return {"cuda": "NVIDIA GPU (not probed)", "rocm": "AMD GPU (not probed)"}.get(vendor_hint(), "CPU")


def evaluate_problem(definition: Definition, workloads: list[Workload], solution: Solution,
                     config: BenchmarkConfig, options: EvalOptions | None = None) -> list[Trace]:
    """Evaluate ``solution`` on ``workloads``; one trace per workload, in order. Never raises for
    anything the solution does."""
    options = options or EvalOptions()
    state = _State(definition, solution, options)
    early = options.early_child
    if early is not None:
        early.staging_taken = True
    staging = early.staging if early is not None else Path(tempfile.mkdtemp(prefix="sol-execbench-"))
    if not options.keep_staging:
        with _live_lock:
            _live_staging.add(staging)
    _staging_note(options, f"staging directory: {staging}")
    try:
        _run(state, workloads, config, staging)
    finally:
        if early is not None:
            early.discard()  # never handed its job (a run that ended before its child): ended now
        if options.keep_staging:
            options.warnings.append(f"staging directory kept: {staging}")
        else:
            shutil.rmtree(staging, ignore_errors=True)
            with _live_lock:
                _live_staging.discard(staging)
            _staging_note(options, f"staging directory removed: {staging} (--keep-staging keeps it)")
    return [state.traces[w.uuid] for w in workloads]


# Staging folders of the evaluations in progress. A stopped dataset run ends its evaluations from
# the main thread with an exception raised in theirs, which can land before their own removal
# finishes; the run removes what is left once they are ended (remove_live_staging).
_live_staging: set[Path] = set()
_live_lock = threading.Lock()


def remove_live_staging() -> list[Path]:
    """Remove the staging folders of evaluations that have not removed their own (a run that owns
    its process calls this as it ends, after its children are ended); the folders removed."""
    with _live_lock:
        left = sorted(_live_staging)
        _live_staging.clear()
    for folder in left:
        shutil.rmtree(folder, ignore_errors=True)
    return left


def _staging_note(opts: EvalOptions, text: str) -> None:
    """-v: staging details, through the same callback as the child's output."""
    if opts.on_log:
        opts.on_log(f"[sol-execbench] {text}")


def _run(state: _State, workloads: list[Workload], config: BenchmarkConfig, staging: Path) -> None:
    opts = state.options
    if config.lock_clocks and os.environ.get(CLOCKS_LOCKED_ENV) != "1":
        for w in workloads:
            state.fail(w, S.RUNTIME_ERROR, f"lock_clocks is set but GPU clocks are not locked ({CLOCKS_LOCKED_ENV} "
                                           f"is '{os.environ.get(CLOCKS_LOCKED_ENV, '')}', expected '1'; with it set, "
                                           "the clocks are also measured under load)")
        return
    from sol_execbench.sandbox import IsolationRefused, plan

    opts.isolation = IsolationMode(opts.isolation)  # the API may pass "strict", "auto", "off"
    state.rounds_dir = _rounds_dir(opts)
    try:
        state.isolation = plan(opts.isolation, _run_folders(state, staging))
    except IsolationRefused as exc:
        for w in workloads:
            state.fail(w, S.RUNTIME_ERROR, str(exc))
        return
    source_dir = staging / "solution"
    write_sources(state.solution, source_dir)
    staged = sorted(str(p.relative_to(source_dir)) for p in source_dir.rglob("*") if p.is_file())
    _staging_note(opts, f"staged {len(staged)} solution file(s) in {source_dir}: {', '.join(staged[:20])}"
                        f"{' ...' if len(staged) > 20 else ''}")
    if opts.build_failure is not None:
        for w in workloads:
            state.fail(w, opts.build_failure.status, opts.build_failure.message)
        return
    began = time.monotonic()
    try:
        outcome = builder_for(state.solution).prepare(state.solution, source_dir, vendor=vendor_hint(),
                                                      timeout_s=opts.compile_timeout_s, use_cache=opts.use_build_cache,
                                                      isolation=opts.isolation)
    except BuildFailure as exc:
        for w in workloads:
            state.fail(w, exc.status, exc.message)
        return
    if outcome.cached is not None:
        _staging_note(opts, f"build: {'build cache hit' if outcome.cached else 'compiled'} in "
                            f"{outcome.build_time_s:.2f} s")
    job: dict[str, Any] = {
        "definition": state.definition.model_dump(mode="json"), "solution": state.solution.model_dump(mode="json"),
        "config": config.model_dump(mode="json"), "device": opts.device, "staging_dir": str(staging),
        "dump_dir": str(opts.dump_failures.resolve()) if opts.dump_failures else None,
        "rounds_dir": state.rounds_dir,
        "warnings": [*opts.warnings, *outcome.warnings], "build_time_s": outcome.build_time_s if outcome.build_time_s else None,
        "build_cached": outcome.cached, "build_artifacts": outcome.artifacts,
        "isolation": {"mode": opts.isolation.value, "record": state.isolation.model_dump(mode="json")},
        "output_path": str(opts.output_path.resolve()) if opts.output_path else None,
        "task": opts.child_task,
        "triton_launchers": str(triton_launchers.store_dir()),
    }
    if opts.sanitize:
        state.sanitizer = run_sanitizer(job, workloads, staging, opts.device, opts.timeout_s)
    deadline = time.monotonic() + opts.timeout_s if opts.sanitize else began + opts.timeout_s
    _run_children(state, workloads, job, staging, deadline)
    triton_launchers.learn(staging, Path(job["triton_launchers"]))  # what warm processes build for later runs


@dataclass
class _ChildLogs:
    """Where the child's stdout and stderr go (apart, so a diagnostic can show each)."""

    stdout: Path
    stderr: Path

    def sizes(self) -> tuple[int, int]:
        return _size(self.stdout), _size(self.stderr)

    def text_since(self, sizes: tuple[int, int]) -> str:
        """What the child wrote after ``sizes`` (for -v), each stream under a heading."""
        parts = []
        for label, path, offset in (("stdout", self.stdout, sizes[0]), ("stderr", self.stderr, sizes[1])):
            text = _read_from(path, offset)
            if text:
                parts.append(f"--- child {label} ---\n{text}")
        return "\n".join(parts)

    def tails(self, max_bytes: int) -> str:
        """The end of each stream with its line count (for a trace's log)."""
        parts = []
        for label, path in (("stdout", self.stdout), ("stderr", self.stderr)):
            text, lines = tail(path, max_bytes)
            if lines:
                parts.append(f"--- child {label} (last of {lines} lines) ---\n{text}")
        return "\n".join(parts) if parts else "--- the child wrote nothing to stdout or stderr ---"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _run_children(state: _State, workloads: list[Workload], job: dict[str, Any], staging: Path, deadline: float) -> None:
    opts = state.options
    pending = list(workloads)
    logs = _ChildLogs(staging / CHILD_STDOUT_LOG, staging / CHILD_STDERR_LOG)
    runs: list[ChildRun] = []
    produced_any = False
    while pending:
        job["workloads"] = [w.model_dump(mode="json") for w in pending]
        job_path = staging / "job.json"
        job_path.write_text(json.dumps(job))
        in_progress: list[str] = []
        by_uuid = {w.uuid: w for w in pending}
        forged: list[str] = []

        def on_message(msg: dict[str, Any], in_progress: list[str] = in_progress,
                       by_uuid: dict[str, Any] = by_uuid, forged: list[str] = forged) -> None:
            if msg.get("type") == "ready":
                state.hardware = msg.get("hardware")
                dev = msg.get("device") or {}
                state.device = DeviceRecord(vendor=dev.get("vendor", "unknown"), index=dev.get("index"),
                                            name=dev.get("name", "unknown"), arch=dev.get("arch"))
            elif msg.get("type") == "start":
                in_progress[:] = [msg["uuid"]]
            elif msg.get("type") == "trace":
                in_progress.clear()
                _stream_trace(state, by_uuid, msg, forged)
            if opts.on_message is not None and not forged:
                opts.on_message(msg)

        # The first child's log from its start (an early child wrote its start-up's output there already).
        start_sizes = logs.sizes() if runs else (0, 0)
        early = opts.early_child if not runs else None
        declined = None
        if early is not None and opts.child_env:  # its environment at start-up lacked these: a fresh child
            early.discard()
            early, declined = None, "the evaluation adds to the environment it started with"
        run = run_child(job_path, logs.stdout, stderr_path=logs.stderr,
                        timeout_s=max(0.0, deadline - time.monotonic()),
                        memory_limit_bytes=opts.memory_limit_bytes, on_message=on_message,
                        env_extra={**({} if opts.keep_staging else {STAGING_CLEANUP_ENV: str(staging)}),
                                   **opts.child_env},
                        warm_device=opts.device, use_warm=opts.use_warm_pool and not opts.child_env, forged=forged,
                        wrapper=[*opts.child_prefix, *(_sandbox_wrapper(state, staging) or [])] or None,
                        early=early, end_at_done=not opts.child_prefix and not opts.child_env)
        runs.append(run)
        if (why := declined or run.early_unused) is not None:
            _staging_note(opts, f"early child not used: {why}; {'a warm' if run.warm else 'a fresh'} child ran the job")
        if opts.on_log:
            opts.on_log(logs.text_since(start_sizes))
        produced_any = produced_any or any(m.get("type") == "trace" for m in run.messages)
        pending = [w for w in pending if w.uuid not in state.traces]
        if not pending:
            break
        if not _settle_failure(state, pending, run, in_progress, logs):
            break
        pending = [w for w in pending if w.uuid not in state.traces]
    if not produced_any:
        _write_no_trace_sidecar(state, staging, logs, runs)


def _sandbox_wrapper(state: _State, staging: Path) -> list[str] | None:
    """bubblewrap's command prefix when that is the planned sandbox (Landlock is entered by the child)."""
    from sol_execbench.sandbox import wrapper_for

    return wrapper_for(state.isolation, _run_folders(state, staging)) if state.isolation else None


def _run_folders(state: _State, staging: Path):
    """What the run's sandbox lets the child write (``RunFolders.of_run``)."""
    from sol_execbench.sandbox import RunFolders

    dump = state.options.dump_failures
    return RunFolders.of_run(staging, str(dump) if dump else None, state.rounds_dir)


def _rounds_dir(opts: EvalOptions) -> str | None:
    """``SOL_EXECBENCH_TIMING_ROUNDS``'s folder, made; where it cannot be made, a warning in every
    trace and no rounds written (the command line and ``evaluate()`` refuse it before this)."""
    try:
        folder = timing_rounds_dir()
    except ValueError as exc:
        opts.warnings.append(str(exc))
        return None
    return str(folder) if folder is not None else None


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _stream_trace(state: _State, by_uuid: dict[str, Workload], msg: dict[str, Any], forged: list[str]) -> None:
    """One verified trace message, recorded (and so written to -o) the moment it arrives. Once an
    unsigned line has appeared on the channel, every later trace of that child is REWARD_HACK:
    a forger could have sent it; the traces already written came before any forgery."""
    try:
        trace = Trace.model_validate(msg["trace"])
    except (KeyError, ValueError):
        return
    workload = by_uuid.get(trace.workload.uuid)
    if workload is None:
        return
    trace.workload = workload  # the workload as the user wrote it
    if forged:
        state.fail(workload, S.REWARD_HACK, _forged_note(forged))
    else:
        state.add(trace)


def _forged_note(forged: list[str]) -> str:
    return (f"{len(forged)} unsigned message(s) appeared on the trace channel (forged traces); first: "
            f"{forged[0][:160]!r}")


def _settle_failure(state: _State, pending: list[Workload], run: ChildRun, in_progress: list[str],
                    logs: _ChildLogs) -> bool:
    """Record why the child stopped early. True when a fresh child should go on with the rest."""
    output = logs.tails(6000)
    fatal = next((m for m in run.messages if m.get("type") == "fatal"), None)
    crash = next((m for m in run.messages if m.get("type") == "crash"), None)
    if run.forged:
        for w in pending:
            state.fail(w, S.REWARD_HACK, _forged_note(run.forged))
        return False
    if run.timed_out:
        for w in pending:
            where = "while this workload was running" if w.uuid in in_progress else "before this workload started"
            state.fail(w, S.TIMEOUT, f"evaluation timeout ({state.options.timeout_s:g} s) reached {where}")
        return False
    if fatal is not None:
        for w in pending:
            state.fail(w, S(fatal["status"]), fatal.get("log", ""))
        return False
    reason = describe_exit(run)
    if crash is not None:
        reason = f"the evaluation raised: {crash.get('log', '')}"
    elif in_progress and (run.returncode == 0 or run.ended_at_done):
        # A clean exit mid-workload (os._exit(0), sys.exit(0)), or the job's end reported then: the
        # harness reports it only after every workload's trace.
        early = next(w for w in pending if w.uuid == in_progress[0])
        why = ("the evaluation process exited with status 0 while this workload was being evaluated (os._exit or "
               "sys.exit in the solution): an early exit cannot produce a result" if run.returncode == 0 else
               "the end of the evaluation's job was reported on its channel while this workload was being "
               "evaluated: only code in the process could send it")
        state.fail(early, S.REWARD_HACK, f"{why}\n{output}")
        return True
    detail = f"{reason}\n{output}"
    if not in_progress:  # died before reaching a workload: every one would die the same way
        for w in pending:
            state.fail(w, S.RUNTIME_ERROR, detail)
        return False
    crashed = next(w for w in pending if w.uuid == in_progress[0])
    state.fail(crashed, S.RUNTIME_ERROR, detail)
    return True


def _write_no_trace_sidecar(state: _State, staging: Path, logs: _ChildLogs, runs: list[ChildRun]) -> None:
    """A bounded diagnostic (not trace JSONL) when the child produced no trace at all: the tails
    and line counts of its stdout and stderr, and how each child run ended."""
    opts = state.options
    stdout_tail, stdout_lines = tail(logs.stdout, SIDECAR_TAIL_BYTES)
    stderr_tail, stderr_lines = tail(logs.stderr, SIDECAR_TAIL_BYTES)
    payload = {"kind": "sol-execbench no-trace diagnostic", "definition": state.definition.name,
               "solution": state.solution.name,
               "stdout_lines": stdout_lines, "stdout_tail": stdout_tail,
               "stderr_lines": stderr_lines, "stderr_tail": stderr_tail, "tail_max_bytes": SIDECAR_TAIL_BYTES,
               "timeout_s": opts.timeout_s, "memory_limit_bytes": opts.memory_limit_bytes,
               "child_run_count": len(runs), "child_runs": [_run_record(run) for run in runs[-SIDECAR_MAX_RUNS:]],
               "note": "not canonical trace JSONL; the traces for this run were made by the parent"}
    text = json.dumps(payload, indent=2)
    if opts.output_path is not None:
        target = _write_beside(opts.output_path.with_name(opts.output_path.name + ".no-trace.json"), text)
    elif opts.keep_staging:
        target = _write_beside(staging / "no-trace.json", text)
    else:
        target = _write_in_temp(state.solution.name, text)
    if target is not None:
        opts.warnings.append(f"no trace came from the evaluation child; diagnostic written to {target}")


def _write_beside(target: Path, text: str) -> Path | None:
    """Write where the user pointed (beside --output, or in the kept staging directory)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target
    except OSError:
        return None


def _run_record(run: ChildRun) -> dict[str, Any]:
    """How one child ended, with what it reported on the channel before it went (a crash or fatal
    message: ``--device bogus`` ends that way, with nothing on stdout or stderr)."""
    record = exit_record(run)
    last = next((m for m in reversed(run.messages) if m.get("type") in ("crash", "fatal")), None)
    if last is not None:
        log = str(last.get("log", ""))
        record["reported"] = {"type": last["type"], "status": last.get("status"),
                              "log": log[-SIDECAR_MESSAGE_BYTES:], "log_truncated": len(log) > SIDECAR_MESSAGE_BYTES}
        if run.returncode == 0:  # it did report, only no trace: say what it reported instead
            record["description"] = f"the child reported a {last['type']} and exited with code 0"
    record["messages"] = len(run.messages)
    record["forged_messages"] = len(run.forged)
    return record


def safe_file_stem(name: str, max_len: int = 80) -> str:
    """``name`` as one harmless path component that still reads like it: separators and anything
    outside [A-Za-z0-9._-] become '_', no leading dots (no '..', no hidden file), bounded length."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip("._-")[:max_len].rstrip("._-")
    return stem or "solution"


def no_trace_dir() -> Path:
    """The per-user folder under the system temp directory for no-trace diagnostics."""
    return Path(tempfile.gettempdir()) / f"sol-execbench-{os.getuid()}" / "no-trace"


def private_dir(path: Path) -> bool:
    """Create ``path`` (mode 0700) and its per-user parent; True only when both are real
    directories of ours, so another user of a shared /tmp cannot have planted them or a link."""
    try:
        for folder in (path.parent, path):
            # One at a time: mkdir(parents=True) would give the parent the default mode, not 0700.
            folder.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(folder)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                return False
        return True
    except OSError:
        return False


def _write_in_temp(solution_name: str, text: str) -> Path | None:
    """Write the diagnostic in the per-user temp folder and prune old ones there; the path, or
    None when it could not be written."""
    folder = no_trace_dir()
    stem = f"{safe_file_stem(solution_name)}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    try:
        if private_dir(folder):
            # O_EXCL: a second evaluation of this solution in the same second and process gets its own file.
            for attempt in range(100):
                target = folder / (f"{stem}.json" if attempt == 0 else f"{stem}-{attempt}.json")
                try:
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    break
                except FileExistsError:
                    continue
            else:
                return None
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            prune_no_trace_dir(folder)
            return target
        # Not a folder of ours: a uniquely named file directly in the temp directory instead.
        fd, name = tempfile.mkstemp(prefix=f"sol-execbench-no-trace-{stem}-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return Path(name)
    except OSError:
        return None


def prune_no_trace_dir(folder: Path, keep: int | None = None, max_age_s: float | None = None) -> None:
    """Keep the newest ``keep`` diagnostics (default SIDECAR_KEEP_FILES), none older than
    ``max_age_s`` (default SIDECAR_KEEP_AGE_S): evaluations without --output (the API, test
    suites) would otherwise fill the temp directory."""
    keep = SIDECAR_KEEP_FILES if keep is None else keep
    max_age_s = SIDECAR_KEEP_AGE_S if max_age_s is None else max_age_s
    now = time.time()
    entries = []
    for path in folder.glob("*.json"):
        try:
            entries.append((path.stat().st_mtime, path))
        except OSError:
            continue  # removed meanwhile by a concurrent prune
    entries.sort(reverse=True)
    for index, (mtime, path) in enumerate(entries):
        if index >= keep or now - mtime > max_age_s:
            try:
                path.unlink()
            except OSError:
                pass
