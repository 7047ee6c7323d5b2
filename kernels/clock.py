"""The SM clock while something runs: a background sampler, read per time window.

    with SmClock() as clock:
        t0 = time.monotonic(); res = bench(...); t1 = time.monotonic()
        mhz = clock.mean(t0, t1)        # mean SM clock (MHz) of the samples taken in [t0, t1], or None

A tensor core's clock depends on what it multiplies (the power its operands' bit patterns draw): the same kernel on
two input distributions can differ by a few percent, and the clock says whether that is the reason. The sampler reads
NVML (pynvml, if importable), else `nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits -lms <period>`
(if its lines arrive as they are sampled), else one such nvidia-smi query per sample; where none works (no driver
tools, a container without nvidia-smi) it samples nothing and `mean` returns None: a benchmark records None, it does
not fail. Needs no GPU to import; the parsing and the window mean are plain Python.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time

PERIOD_MS = 50


def parse_mhz(line: str) -> float | None:
    """One line of `nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits`: "1980" -> 1980.0; anything
    else ("[N/A]", "", a header) -> None."""
    try:
        v = float(line.strip().split(",")[0])
    except (ValueError, IndexError):
        return None
    return v if v > 0 else None


def window_mean(samples: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Mean MHz of the (time, MHz) samples with t0 <= time <= t1; None if there is none."""
    xs = [mhz for t, mhz in samples if t0 <= t <= t1]
    return sum(xs) / len(xs) if xs else None


def _device_id() -> str:
    """The nvidia-smi / NVML id of the GPU torch uses: its UUID where torch reports one, else index 0."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    except Exception:  # noqa: BLE001 - no torch, no GPU, an old torch: the first GPU
        return "0"


class SmClock:
    """Samples the SM clock every `period_ms` in a background thread until stopped (a context manager).
    `source`: "nvml", "nvidia-smi -lms", "nvidia-smi" (one query per sample) or None (nothing could be sampled)."""

    def __init__(self, period_ms: int = PERIOD_MS, device: str | None = None):
        self.period_ms = period_ms
        self.device = device
        self.samples: list[tuple[float, float]] = []
        self.source: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None

    # -- sources ---------------------------------------------------------------------------------------------
    def _nvml(self) -> bool:
        try:
            import pynvml

            pynvml.nvmlInit()
            dev = self.device or _device_id()
            h = (pynvml.nvmlDeviceGetHandleByUUID(dev) if dev.startswith("GPU-")
                 else pynvml.nvmlDeviceGetHandleByIndex(int(dev)))
            pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        except Exception:  # noqa: BLE001 - not importable, no driver: try nvidia-smi
            return False

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    mhz = float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
                    self.samples.append((time.monotonic(), mhz))
                except Exception:  # noqa: BLE001 - a failed read is a missing sample
                    pass
                self._stop.wait(self.period_ms / 1e3)

        self._thread = threading.Thread(target=loop, daemon=True)
        self.source = "nvml"
        return True

    def _cmd(self, loop_ms: int | None = None) -> list[str]:
        cmd = [shutil.which("nvidia-smi") or "nvidia-smi", f"--id={self.device or _device_id()}",
               "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"]
        return cmd + [f"-lms={loop_ms}"] if loop_ms else cmd

    def _smi_stream(self) -> bool:
        """nvidia-smi's own loop (-lms), read line by line: used only if its lines arrive as they are sampled (a
        piped nvidia-smi that buffered its output would time-stamp samples late)."""
        try:
            self._proc = subprocess.Popen(self._cmd(self.period_ms), stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except OSError:
            return False

        def loop() -> None:
            for line in self._proc.stdout:
                v = parse_mhz(line)
                if v is not None:
                    self.samples.append((time.monotonic(), v))
                if self._stop.is_set():
                    break

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and len(self.samples) < 3:
            time.sleep(self.period_ms / 1e3)
        if len(self.samples) >= 3:
            self.source = "nvidia-smi -lms"
            return True
        self._stop.set()
        self._proc.terminate()
        self._thread.join(timeout=2)
        self._proc, self._thread, self.samples = None, None, []
        self._stop.clear()
        return False

    def _smi_poll(self) -> bool:
        """One nvidia-smi query per sample (each completes before it is read: no buffering question)."""
        cmd = self._cmd()
        try:
            first = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
        if first.returncode != 0 or parse_mhz(first.stdout) is None:
            return False

        def loop() -> None:
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
                    v = parse_mhz(r.stdout)
                    if v is not None:
                        self.samples.append(((t0 + time.monotonic()) / 2, v))
                except (OSError, subprocess.TimeoutExpired):
                    pass
                self._stop.wait(self.period_ms / 1e3)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        self.source = "nvidia-smi"
        return True

    # -- use -------------------------------------------------------------------------------------------------
    def start(self) -> "SmClock":
        if self._nvml():
            self._thread.start()
        elif not shutil.which("nvidia-smi") or not (self._smi_stream() or self._smi_poll()):
            return self  # nothing to sample with: mean() is None
        time.sleep(2 * self.period_ms / 1e3)  # the first samples before the first window opens
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def mean(self, t0: float, t1: float) -> float | None:
        """Mean SM clock (MHz) over [t0, t1] (time.monotonic() seconds); None where nothing was sampled."""
        return window_mean(list(self.samples), t0, t1)

    def __enter__(self) -> "SmClock":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def timed(clock: SmClock | None, fn):
    """(fn(), the mean SM MHz while it ran or None)."""
    t0 = time.monotonic()
    out = fn()
    t1 = time.monotonic()
    return out, (clock.mean(t0, t1) if clock is not None else None)
