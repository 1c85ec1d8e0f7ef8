"""Power while a benchmark runs: tegrastats sampled in the background, summarised per window.

Rails differ per board and JetPack (tests/device/samples/tegrastats/: a captured line per board, its
source in PROVENANCE.md); ``tegrastats.board_power_mw`` gives the module's power: its input rail where
the board has one (VDD_IN, POM_5V_IN), else the sum of the rails (AGX Xavier, AGX Orin). The benchmark
marks a window right before its timed back-to-back loop (after warm-up) and reads it right after; energy
per image is worked out on the host from the window's mean power, the loop's wall time and the images
it ran (``tegrastats.energy_per_inference_mj``). The window also keeps the hottest reading of each
temperature sensor (``temps_max_c``) and the lowest and highest GPU and memory (EMC) clock it saw
(``clocks_mhz``: tegrastats prints the MHz only when run as root; without them the key is absent): a GPU clock
that moved during the timed loop marks the night as throttled for the gate (pipeline.report.gate_nights).
The child gets ``stdin=DEVNULL``: it must never read the agent's stdin, which carries the protocol.
"""

import shutil
import subprocess
import threading
import time

from . import ParseError


class PowerSampler(object):
    def __init__(self, process):
        self.process = process
        self.lines = []  # (monotonic time, line)
        self.started = 0
        self.started_at = time.monotonic()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @classmethod
    def start_if_available(cls, interval_ms=100):
        """A running sampler, or None on a machine without tegrastats (not a Jetson)."""
        exe = shutil.which("tegrastats")
        if exe is None:
            return None
        try:
            process = subprocess.Popen([exe, "--interval", str(int(interval_ms))], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return None
        return cls(process)

    def _read(self):
        for raw in iter(self.process.stdout.readline, b""):
            self.lines.append((time.monotonic(), raw.decode("utf-8", "replace").strip()))

    def mark(self):
        """Start a window (right before the timed work of the next batch size)."""
        self.started = len(self.lines)
        self.started_at = time.monotonic()

    def count(self):
        """Lines received since ``mark`` (parsed or not)."""
        return len(self.lines) - self.started

    def window(self):
        """The samples since ``mark``: {samples, unparsed, seconds, rails_mw (mean per rail), board_mw,
        board_power_source, temps_max_c (hottest reading per sensor)}, and ``clocks_mhz`` {"gpu": {min, max},
        "emc": {min, max}} for the clocks tegrastats printed in MHz (as root only)."""
        return summarize_window([line for _, line in self.lines[self.started:]], time.monotonic() - self.started_at)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()


def summarize_window(lines, seconds):
    """PowerSampler.window's figures from the window's tegrastats ``lines`` (text) and its length."""
    from .tegrastats import board_power_mw, parse_line

    sums, count, bad, temps, clocks = {}, 0, 0, {}, {}
    for line in lines:
        try:
            parsed = parse_line(line)
        except ParseError:
            bad += 1
            continue
        count += 1
        for rail, value in parsed.get("rails_mw", {}).items():
            sums[rail] = sums.get(rail, 0) + value["now"]
        for sensor, celsius in parsed.get("temps_c", {}).items():
            temps[sensor] = max(celsius, temps.get(sensor, celsius))
        for unit in ("gpu", "emc"):
            mhz = (parsed.get(unit) or {}).get("freq_mhz")
            if mhz is not None:
                seen = clocks.setdefault(unit, {"min": mhz, "max": mhz})
                seen["min"], seen["max"] = min(seen["min"], mhz), max(seen["max"], mhz)
    rails = {rail: total / float(count) for rail, total in sums.items()} if count else {}
    board_mw, source = board_power_mw(rails)
    out = {"samples": count, "unparsed": bad, "seconds": seconds, "rails_mw": rails, "board_mw": board_mw,
           "board_power_source": source, "temps_max_c": temps}
    if clocks:
        out["clocks_mhz"] = clocks
    return out
