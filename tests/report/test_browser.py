"""The report in a real browser: headless Chromium (Debian's package) opens the file from disk,
takes a screenshot, and the test checks that the plots rendered (their colours are on screen, and
vanish when the SVGs are taken out), that the console stayed empty and that the page asked for
nothing over the network.

What the page asks for is read from Chromium itself, over the DevTools protocol on a pipe
(``--remote-debugging-pipe``): every request the page's target sends (Network.requestWillBeSent)
and every console message, exception and log entry (a blocked request under the page's CSP shows
up there). The browser's own traffic (update checks, sign-in and time probes: Chromium 156 makes
them even with every background switch off, and they change between releases) belongs to the
browser, not to the page, and is not counted. A proxy on 127.0.0.1 still sinks whatever leaves
the browser, so nothing reaches the network. A control page (an image URL and a console.error,
no CSP) proves both detectors fire."""

import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import time

import pytest

from pipeline.report import write_report

from reportkit import gate_row, make_run, write_comparison

pytestmark = pytest.mark.slow

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
PLOT_BLUE = (0x1F, 0x77, 0xB4)  # pipeline.report.plots.COLORS[0]
PLOT_RED = (0xD6, 0x27, 0x28)
QUIET = ("--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
         "--disable-extensions", "--disable-client-side-phishing-detection", "--disable-domain-reliability", "--no-pings",
         "--safebrowsing-disable-auto-update", "--no-default-browser-check", "--dns-prefetch-disable",
         "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate,"
         "AutofillServerCommunication,DialMediaRouteProvider,PreconnectToSearch,DnsOverHttps")


@pytest.fixture(scope="module")
def chromium(tmp_path_factory, sink):
    """One headless Chromium for the module (its start is most of a visit's time); each visit opens its page in
    a browser context of its own (Target.createBrowserContext: its own cookies, cache and storage, as a fresh
    profile has) and closes it after."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed: apt-get install chromium")
    browser = Browser(CHROMIUM, tmp_path_factory.mktemp("chromium"), sink)
    yield browser
    browser.close()


class Sink(http.server.BaseHTTPRequestHandler):
    """Answers 404 to whatever the browser sends through it, so nothing leaves this machine."""

    def _refuse(self):
        self.send_response(404)
        self.end_headers()

    do_GET = do_POST = do_HEAD = do_CONNECT = _refuse

    def log_message(self, *args):
        pass


def _serve_sink():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture(scope="module")
def sink():
    """The browser's own proxy: what it sends outside a page's context goes here, never to the network."""
    server = _serve_sink()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy():
    """The proxy of the test's browser contexts (Target.createBrowserContext's proxyServer)."""
    server = _serve_sink()
    yield server
    server.shutdown()
    server.server_close()


class DevTools:
    """The DevTools protocol over Chromium's pipe: NUL-terminated JSON messages on fds 3 (to the
    browser) and 4 (from it)."""

    def __init__(self, to_browser, from_browser):
        self.out, self.inp = to_browser, from_browser
        self.buffer = b""
        self.events = []
        self.next_id = 0

    def _read(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer over the DevTools pipe")
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, session=None, timeout=60, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, (method, reply["error"])
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method, session=None, timeout=60):
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method and (session is None or e.get("sessionId") == session)
                      for e in self.events):
            self.events.append(self._read(deadline))

    def settle(self, seconds):
        """Keep collecting events for ``seconds`` (late requests and console messages)."""
        import select

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([self.inp], [], [], max(0.0, end - time.monotonic()))[0]:
                self.events.append(self._read(end + 5))


class Visit:
    def __init__(self, console, requests, values=()):
        self.console, self.requests, self.values = console, requests, list(values)


class Browser:
    """Headless Chromium driven over its DevTools pipe, its own traffic sent to ``proxy`` (a sink)."""

    def __init__(self, path, workdir, proxy):
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        argv = [path, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", *QUIET,
                "--user-data-dir={}".format(workdir / "profile"), "--remote-debugging-pipe",
                "--proxy-server=http://127.0.0.1:{}".format(proxy.server_address[1]), "--proxy-bypass-list=<-loopback>",
                "about:blank"]

        def fds():  # the browser reads commands on fd 3 and writes answers on fd 4 (dup2'd fds are inherited;
            os.dup2(to_browser_r, 3)  # close_fds would close them after this runs, and Python's own fds are
            os.dup2(from_browser_w, 4)  # close-on-exec anyway)

        log = open(workdir / "chromium.log", "wb")  # its chatter, for a failing test's reader
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=fds,
                                        close_fds=False)
        log.close()
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.to_browser, self.from_browser = to_browser_w, from_browser_r
        self.tools = DevTools(to_browser_w, from_browser_r)

    def close(self):
        try:
            self.tools.call("Browser.close")
        finally:
            os.close(self.to_browser)
            os.close(self.from_browser)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def visit(chromium, page, png, proxy, size=(1200, 5200), evaluate=()):
    """Open ``page`` (a file) in the module's headless Chromium, in a new browser context whose requests go to
    ``proxy``, and save a screenshot to ``png``; returns the console messages and the requests the page itself
    sent (the document's own load excluded), and the value of each JavaScript expression in ``evaluate``
    (DevTools Runtime.evaluate, run by the test after the load: the page itself has no script and its CSP
    allows none)."""
    import base64

    tools = chromium.tools
    url = page.resolve().as_uri()
    context = tools.call("Target.createBrowserContext", proxyServer="http://127.0.0.1:{}".format(proxy.server_address[1]),
                         proxyBypassList="<-loopback>")["browserContextId"]
    try:
        target = tools.call("Target.createTarget", url="about:blank", browserContextId=context)["targetId"]
        session = tools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Network", "Runtime", "Log", "Page"):
            tools.call(domain + ".enable", session)
        tools.call("Emulation.setDeviceMetricsOverride", session, width=size[0], height=size[1],
                   deviceScaleFactor=1, mobile=False)
        tools.events = []  # what about:blank did is not the page's
        tools.call("Page.navigate", session, url=url)
        tools.wait_for("Page.loadEventFired", session)
        tools.settle(0.5)
        shot = tools.call("Page.captureScreenshot", session, format="png")
        png.write_bytes(base64.b64decode(shot["data"]))
        values = [tools.call("Runtime.evaluate", session, expression=e, returnByValue=True).get("result", {}).get("value")
                  for e in evaluate]
        tools.call("Target.closeTarget", targetId=target)
    finally:
        tools.call("Target.disposeBrowserContext", browserContextId=context)
    mine = [e for e in tools.events if e.get("sessionId") == session]
    requests = [e["params"]["request"]["url"] for e in mine if e.get("method") == "Network.requestWillBeSent"
                and e["params"]["request"]["url"] != url]
    console = ["{}: {}".format(e["params"]["type"], " ".join(str(a.get("value", a.get("description", "")))
                                                          for a in e["params"].get("args", [])))
               for e in mine if e.get("method") == "Runtime.consoleAPICalled"]
    console += ["exception: {}".format(e["params"]["exceptionDetails"].get("text"))
                for e in mine if e.get("method") == "Runtime.exceptionThrown"]
    console += ["{} {}: {}".format(e["params"]["entry"]["source"], e["params"]["entry"]["level"],
                                   e["params"]["entry"]["text"])
                for e in mine if e.get("method") == "Log.entryAdded"]
    return Visit(console, requests, values)


def colour_pixels(png, rgb, tolerance=40):
    from PIL import Image
    import numpy as np

    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return int((np.abs(image - np.array(rgb)).sum(axis=2) < tolerance).sum())


def ink(png):
    """Fraction of pixels that are not (near) white."""
    from PIL import Image
    import numpy as np

    image = np.asarray(Image.open(png).convert("L"))
    return float((image < 235).mean())


def test_the_detectors_fire_on_a_control_page(chromium, proxy, tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><html><body><p>control</p><img src="http://example.invalid/pixel.png">'
                    '<script>console.error("control error")</script></body></html>')
    seen = visit(chromium, page, tmp_path / "control.png", proxy, size=(400, 300))
    assert any("control error" in line for line in seen.console), seen.console
    assert any("example.invalid" in r for r in seen.requests), seen.requests


def test_report_renders_its_plots_offline_without_console_errors(chromium, proxy, tmp_path):
    nights = tmp_path / "nightly"
    for i, day in enumerate(("2026-11-21", "2026-11-22", "2026-11-23")):
        make_run(nights / day, medians={1: 4.0 + 0.2 * i, 8: 20.0 - i}, seed=i, finished=day + "T02:00:00+0000")
    run = make_run(tmp_path / "runs" / "jetson_tx2", finished="2026-11-24T02:00:00+0000")
    report = write_report(run, history=[nights])
    png = tmp_path / "report.png"
    seen = visit(chromium, report, png, proxy)
    assert seen.console == []
    assert seen.requests == []
    assert ink(png) > 0.02
    blue, red = colour_pixels(png, PLOT_BLUE), colour_pixels(png, PLOT_RED)
    assert blue > 2000 and red > 1000, (blue, red)

    # the same page without its SVGs: the plot colours are gone, so they were the plots
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"<svg.*?</svg>", "", report.read_text(), flags=re.S))
    visit(chromium, bare, tmp_path / "bare.png", proxy)
    assert colour_pixels(tmp_path / "bare.png", PLOT_BLUE) < blue / 20


def test_each_plot_renders_on_its_own(chromium, proxy, tmp_path):
    run = make_run(tmp_path / "tx2")
    page = write_report(run, history=[make_run(tmp_path / "older", seed=5, finished="2026-11-20T02:00:00+0000")]).read_text()
    head = page[:page.index("<body>")]
    plots = re.findall(r'<div class="plot">(<svg.*?</svg>)</div>', page, flags=re.S)
    assert len(plots) == 8  # latency CDF, throughput, power, training; trends: p50, p99, throughput, accuracy
    for i, svg in enumerate(plots):
        single = tmp_path / "plot{}.html".format(i)
        single.write_text(head + "<body>" + svg + "</body></html>")
        png = tmp_path / "plot{}.png".format(i)
        seen = visit(chromium, single, png, proxy, size=(900, 900))
        assert seen.console == [] and seen.requests == [], (i, seen.console, seen.requests)
        assert ink(png) > 0.005, "plot {} is blank".format(i)
        assert colour_pixels(png, PLOT_BLUE) + colour_pixels(png, (0x2C, 0xA0, 0x2C)) > 150, "plot {} has no data drawn".format(i)


# What is on the first screen (a 1200 x 900 viewport, not scrolled): the verdict element's box and every
# text node whose first line box starts above the fold.
FIRST_SCREEN = """(() => {
  const v = document.getElementById('verdict');
  const box = v ? v.getBoundingClientRect() : null;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const rects = range.getClientRects();
    if (rects.length && rects[0].top < window.innerHeight && rects[0].bottom > 0) seen.push(node.textContent.trim());
  }
  return {top: box && box.top, bottom: box && box.bottom, verdict: v ? v.innerText : null,
          fold: window.innerHeight, above: seen.join(' '), scrollY: window.scrollY};
})()"""
BANNER_RED = (0xFD, 0xE8, 0xE8)  # pipeline.report.html: #verdict.v-regression
BANNER_GREEN = (0xE6, 0xF5, 0xE9)  # #verdict.v-pass


def _night(tmp_path, verdict):
    """A nightly run with 12 earlier nights and a comparison.json: tonight 10 % slower at batch 1 (regression)
    or as usual (pass)."""
    nights = tmp_path / "history"
    for i in range(12):
        day = "2026-11-{:02d}".format(10 + i)
        make_run(nights / "night-{}T0200-{:07x}-{}.1".format(day, 0xabc1230 + i, 100 + i), medians={1: 4.0, 8: 20.0},
                 seed=i, n=300, spread=0.03, finished=day + "T02:00:00+0000")
    slow = 1.10 if verdict == "regression" else 1.0
    run = make_run(tmp_path / "night-2026-11-24T0200-deadbee-200.1", medians={1: 4.0 * slow, 8: 20.0}, seed=50, n=300,
                   spread=0.03, finished="2026-11-24T02:00:00+0000")
    status = "regression" if verdict == "regression" else "ok"
    rows = [gate_row("p50_ms", 1, 4.0, 4.0 * slow, status, note="beyond 5 %" if slow > 1 else "within 5 %"),
            gate_row("throughput_ips", 1, 250.0, 250.0 / slow, status, note="beyond 5 %" if slow > 1 else "within 5 %"),
            gate_row("p50_ms", 8, 20.0, 20.0, "ok", note="within 5 %")]
    # a long list of reasons: the verdict still leads the page
    write_comparison(run, verdict, rows, reasons=["reference: median of 12 nights"] * 3)
    return write_report(run, history=[nights])


@pytest.mark.parametrize("verdict, word, colour", [("regression", "REGRESSION", BANNER_RED), ("pass", "PASS", BANNER_GREEN)])
def test_the_first_screen_says_the_nights_verdict(chromium, proxy, tmp_path, verdict, word, colour):
    report = _night(tmp_path, verdict)
    png = tmp_path / "first-screen.png"
    seen = visit(chromium, report, png, proxy, size=(1200, 900), evaluate=[FIRST_SCREEN])
    assert seen.console == [] and seen.requests == []
    screen = seen.values[0]
    assert screen["fold"] == 900 and screen["scrollY"] == 0
    assert 0 <= screen["top"] < screen["bottom"] <= 900, screen  # the whole verdict box is above the fold
    assert screen["verdict"].startswith(word), screen["verdict"]
    assert word in screen["above"] and "jetson_tx2" in screen["above"]
    if verdict == "regression":
        assert "p50 latency at batch 1 +10.0%" in screen["above"] and "throughput at batch 1" in screen["above"]
        assert "PASS" not in screen["above"]
    else:
        assert "REGRESSION" not in screen["above"] and "no figure worse than the reference" in screen["above"]
    for fact in ("commit", "deadbee", "config digest", "fingerprint", "TensorRT", "MAXN"):
        assert fact in screen["above"], fact
    assert colour_pixels(png, colour, tolerance=6) > 20000  # the banner's colour is on the first screen


# The boxes of the first screen's blocks (by id) and the words above the fold, as FIRST_SCREEN reads them.
BOXES = """((ids) => {
  const boxes = {};
  for (const id of ids) { const e = document.getElementById(id); if (e) { const r = e.getBoundingClientRect();
    boxes[id] = {top: r.top, bottom: r.bottom, text: e.innerText}; } }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const rects = range.getClientRects();
    if (rects.length && rects[0].top < window.innerHeight && rects[0].bottom > 0) seen.push(node.textContent.trim());
  }
  return {boxes: boxes, fold: window.innerHeight, above: seen.join(' ')};
})(%s)"""


def test_the_first_screen_of_a_local_run_answers_what_it_was_opened_for(chromium, proxy, tmp_path):
    from test_first_screen import PENDING, local_run

    report = write_report(local_run(tmp_path / "jetson_tx2"))
    seen = visit(chromium, report, tmp_path / "local.png", proxy, size=(1200, 900),
                 evaluate=[BOXES % json.dumps(["answers", "verdict"])])
    assert seen.console == [] and seen.requests == []
    screen = seen.values[0]
    box = screen["boxes"]["answers"]
    assert 0 <= box["top"] < box["bottom"] <= screen["fold"], screen  # the whole answers block is on the first screen
    assert "verdict" not in screen["boxes"] and "NOT GATED" not in screen["above"]
    text = " ".join(box["text"].split())
    order = ["YES", "runs on jetson_tx2", "route onnx", "converted", "pending", PENDING.split(":")[0],
             "next: deploy run configs/jetson_tx2.yaml --set device.transport=ssh --set device.host=BOARD",
             "accuracy vs TensorFlow", "1.1e-06", "within tolerance", "latency", "ms at batch 1", "not Jetson figures"]
    at = [text.find(w) for w in order]
    assert -1 not in at and at == sorted(at), list(zip(order, at))
    assert colour_pixels(tmp_path / "local.png", (0x2A, 0x9A, 0x47), tolerance=6) > 1500  # the YES block's green edge


def test_the_first_screen_of_a_red_night_says_the_job_failed_before_the_figures(chromium, proxy, tmp_path):
    from test_first_screen import GITHUB_STEPS

    run = make_run(tmp_path / "night-2026-11-24T0200-deadbee-200.1", medians={1: 4.0, 8: 20.0}, seed=50, n=300, spread=0.03)
    write_comparison(run, "pass", [gate_row("p50_ms", 1, 4.0, 4.0, "ok", note="within 5 %")])
    steps = [(name, v["outcome"]) for name, v in GITHUB_STEPS.items()]
    report = write_report(run, steps=steps)
    png = tmp_path / "red-night.png"
    seen = visit(chromium, report, png, proxy, size=(1200, 900), evaluate=[BOXES % json.dumps(["job", "verdict", "answers"])])
    assert seen.console == [] and seen.requests == []
    screen = seen.values[0]
    job, verdict = screen["boxes"]["job"], screen["boxes"]["verdict"]
    assert 0 <= job["top"] < job["bottom"] <= verdict["top"] < verdict["bottom"] <= screen["fold"], screen
    assert " ".join(job["text"].split()).startswith("JOB FAILED onboard: failure")
    assert "the figures' verdict alone: the job failed (onboard: failure)" in verdict["text"]
    assert colour_pixels(png, BANNER_RED, tolerance=6) > 20000  # the red job block is on the first screen
    assert colour_pixels(png, BANNER_GREEN, tolerance=6) < 500  # and no green PASS banner beside it
